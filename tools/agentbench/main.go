// Command agentbench measures pilot-agent as it runs in a pod: the stripped
// binary's size, the time from exec to ready (workload certificate from
// istiod's CA, first NameTable, xDS connected) and the idle resident memory,
// with istiod in a node namespace of a lab. Run as root: make bench-agent.
//
// With -services N istiod also serves N generated Services (so the agent's
// NameTable holds them) and the memory is read with a breakdown; with
// -dns-load D the tool then runs D of dnsperf queries from the pod (mesh
// names and names forwarded to an upstream it runs in the node namespace,
// answering with TTL 0) and reads the memory during and after the load.
//
// -agent istio runs Istio's own pilot-agent (built by pkg/istiobin) in the
// same pod, with the same environment, under the same istiod, so the two
// are measured side by side. -proxy stand-in (the default) runs the agent
// as an injected sidecar, with a stand-in for Envoy (there is no Envoy on
// these machines); -proxy none runs it proxyless, as the lab's pods.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

type options struct {
	runs     int
	idle     time.Duration
	services int
	dnsLoad  time.Duration
	ship     bool
	profiles string
	profRate int
	tags     string
	rest     time.Duration
	agent    string
	proxy    string
	dnsSets  []string
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 10, "agent starts to time")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "how long the agent idles before its RSS is read")
	flag.IntVar(&o.services, "services", 0, "generated Services istiod serves besides the lab's mesh (0: none)")
	flag.DurationVar(&o.dnsLoad, "dns-load", 0, "dnsperf load from the pod after the idle reading (0: none)")
	flag.BoolVar(&o.ship, "ship", false, "run the binary `make build` ships (CGO_ENABLED=0, stripped) instead of the lab's build")
	flag.StringVar(&o.profiles, "profiles", "", "directory that keeps the agent's heap profiles (default: the lab's, removed at the end)")
	flag.IntVar(&o.profRate, "memprofilerate", 0, "the agent's GODEBUG memprofilerate (bytes per heap-profile sample; 0: Go's default, 512 kB). Costs the agent memory: not for the readings")
	flag.StringVar(&o.tags, "tags", "grpcnotrace", "build tags for the stripped pilot-agent build, the one -ship runs (the Makefile's GOTAGS)")
	flag.DurationVar(&o.rest, "rest", 10*time.Second, "how long after the DNS load the last reading comes")
	flag.StringVar(&o.agent, "agent", agentSkiff, "the agent measured: skiff, or istio (Istio's own pilot-agent)")
	flag.StringVar(&o.proxy, "proxy", proxyStandIn, "stand-in: a sidecar with a stand-in for Envoy; none: proxyless")
	sets := flag.String("dns-sets", setMixed, "comma-separated query sets for -dns-load, one dnsperf run of -dns-load each: mixed (mesh and forwarded names, TTL 0), mesh, forward (TTL 0), cached (TTL 3600)")
	flag.Parse()
	o.dnsSets = strings.Split(*sets, ",")
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	detailed := o.services > 0 || o.dnsLoad > 0
	gc := &gcTrace{}
	l, err := lab.New("10.48.0.0/24", gc)
	if err != nil {
		return err
	}
	defer l.Close()
	if detailed {
		// The Go runtime's own view of heap, stacks and globals, at each GC.
		godebug := "gctrace=1"
		if o.profRate > 0 {
			godebug += fmt.Sprintf(",memprofilerate=%d", o.profRate)
		}
		os.Setenv("SKIFF_AGENT_ENV", strings.TrimSpace(os.Getenv("SKIFF_AGENT_ENV")+" GODEBUG="+godebug))
	}
	if o.dnsLoad > 0 {
		stop, err := startUpstream(l)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := l.Build(".", "./cmd/istiod", "./cmd/pilot-agent", "./cmd/istio-iptables", "./examples/grpc-app"); err != nil {
		return err
	}
	// Ship-size binary, as `make build` makes it.
	stripped := filepath.Join(l.Dir, "pilot-agent-stripped")
	if o.ship {
		os.Setenv("CGO_ENABLED", "0")
	}
	if err := lab.GoBuild(".", stripped, "./cmd/pilot-agent", "-tags", o.tags, "-ldflags", "-s -w"); err != nil {
		return err
	}
	st, err := os.Stat(stripped)
	if err != nil {
		return err
	}
	twin := filepath.Join(l.Bin, "pilot-agent") // the lab's build has its symbols
	if o.ship {
		if err := os.Rename(stripped, filepath.Join(l.Bin, "pilot-agent")); err != nil {
			return err
		}
		// The same build with its symbols, to name what the resident pages hold.
		twin = filepath.Join(l.Dir, "pilot-agent-symbols")
		if err := lab.GoBuild(".", twin, "./cmd/pilot-agent", "-tags", o.tags); err != nil {
			return err
		}
	}
	m, err := lab.StartMesh(l, true)
	if err != nil {
		return err
	}
	if o.services > 0 {
		if err := writeServices(m.ConfigDir, o.services); err != nil {
			return err
		}
		// istiod watches its config dir; wait until the running agent's
		// table has the last service, so every start below gets them all.
		last := svcHost(o.services - 1)
		deadline := time.Now().Add(30 * time.Second)
		for !resolves(m, "productpage", last) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not in the agent's NameTable after 30s", last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	p := m.Pods["productpage"]
	bin, err := prepareAgent(l, m, p, o)
	if err != nil {
		return err
	}
	want := "reviews.default.svc.cluster.local"
	if o.services > 0 {
		want = svcHost(o.services - 1)
	}
	var times, answering []time.Duration
	for i := 0; i < o.runs; i++ {
		p.Agent.Stop(10 * time.Second)
		gc.reset()
		d, a, err := startAgent(l, m, p, want)
		if err != nil {
			return err
		}
		times, answering = append(times, d), append(answering, a)
	}
	slices.Sort(times)
	slices.Sort(answering)
	time.Sleep(o.idle)
	pid := p.Agent.Cmd.Process.Pid
	mem, err := readMemory(pid)
	if err != nil {
		return err
	}
	fmt.Printf("agent: %s, proxy: %s\n", o.agent, o.proxy)
	fmt.Printf("load average at the idle reading: %s\n", loadAverage())
	size := st.Size()
	if o.agent != agentSkiff {
		if bst, err := os.Stat(bin); err == nil {
			size = bst.Size()
		}
	}
	fmt.Printf("binary (stripped): %.1f MB\n", float64(size)/1e6)
	fmt.Printf("exec to ready, %d runs: median %s, min %s, max %s (polled every 2 ms)\n", o.runs,
		times[len(times)/2].Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	fmt.Printf("exec to ready and %s answered from the pod: median %s, min %s, max %s\n", want,
		answering[len(answering)/2].Round(time.Millisecond), answering[0].Round(time.Millisecond), answering[len(answering)-1].Round(time.Millisecond))
	s := mem.status
	fmt.Printf("idle RSS after %s: %.1f MB (anonymous %.1f MB, file-backed %.1f MB: the binary's pages)\n", o.idle,
		float64(s["VmRSS"])/1024, float64(s["RssAnon"])/1024, float64(s["RssFile"])/1024)
	if !detailed {
		return nil
	}
	if o.agent == agentSkiff {
		fmt.Printf("agent binary: %s, build tags %q; services in the mesh: %d generated + the lab's\n",
			map[bool]string{true: "as shipped (CGO_ENABLED=0, -s -w)", false: "the lab's go build"}[o.ship], o.tags, o.services)
	} else {
		fmt.Printf("agent binary: Istio's pilot-agent %s (CGO_ENABLED=0, -s -w); services in the mesh: %d generated + the lab's\n",
			istiobin.ModuleVersion, o.services)
	}
	mem.print(fmt.Sprintf("idle, %s after ready", o.idle), bin)
	printGC(gc)
	if ms, err := memStats(l, &p.NS); err != nil {
		fmt.Printf("  MemStats: %v\n", err)
	} else {
		fmt.Printf("  MemStats (binary figures in MiB): %s\n", ms)
	}
	if o.agent == agentSkiff {
		if err := pageReport(pid, bin, twin); err != nil {
			fmt.Printf("  binary pages: %v\n", err)
		}
	}
	if !resolves(m, "productpage", want) {
		return fmt.Errorf("%s does not resolve from the pod", svcHost(o.services-1))
	}
	if o.dnsLoad > 0 {
		if err := loadAndRead(l, m, pid, bin, gc, o); err != nil {
			return err
		}
	}
	// After the readings: the profile's collection changes the heap.
	if path, top, err := heapProfile(l, &p.NS, bin, o.profileDir(l), "heap.pb.gz"); err != nil {
		fmt.Printf("heap profile: %v\n", err)
	} else {
		fmt.Printf("heap profile after the readings (%s; gc=1, sampled every %s), in-use bytes:\n%s\n", path, profRate(o.profRate), indent(top))
	}
	if o.agent != agentSkiff {
		return nil
	}
	return printParts(l, m, bin, o.services)
}

func profRate(n int) string {
	if n <= 0 {
		return "512 kB"
	}
	return fmt.Sprintf("%d B", n)
}

// printParts measures pieces of the agent's memory outside the agent, after
// its readings: what package initialisation costs, and what its NameTable
// and the DNS proxy's precomputed answers take on the heap.
func printParts(l *lab.Lab, m *lab.Mesh, bin string, services int) error {
	rss, alloc, top, err := initCost(l.Dir, bin)
	if err != nil {
		return err
	}
	fmt.Printf("package initialisation only (pilot-agent version): peak RSS %s; initialisers allocate %.1f MB (largest: %s)\n",
		mb(rss), float64(alloc)/(1<<20), strings.Join(top, ", "))
	p := m.Pods["productpage"]
	names, tableKB, answersKB, err := tableCost(l, &p.NS, p.Namespace, services)
	if err != nil {
		return err
	}
	fmt.Printf("the agent's NameTable (%d names), rebuilt in this process: decoded proto %s live heap, DNS proxy's precomputed answers (with SRV for port 8080) %s more\n",
		names, mb(tableKB), mb(answersKB))
	return nil
}

// loadAndRead runs the DNS load, one dnsperf run per query set, reading
// the agent's memory every 250 ms, and prints the reading with the largest
// VmRSS, then one after -rest (10 s).
func loadAndRead(l *lab.Lab, m *lab.Mesh, pid int, bin string, gc *gcTrace, o options) error {
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var outs []string
		for _, set := range o.dnsSets {
			out, err := dnsLoad(l, &m.Pods["productpage"].NS, set, o.services, o.dnsLoad)
			if err != nil {
				done <- result{err: fmt.Errorf("query set %s: %w", set, err)}
				return
			}
			outs = append(outs, fmt.Sprintf("query set %s:\n%s", set, indent(out)))
		}
		done <- result{out: strings.Join(outs, "\n")}
	}()
	var peak memory
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var res result
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			if r, err := readMemory(pid); err == nil && r.status["VmRSS"] > peak.status["VmRSS"] {
				peak = r
			}
		}
	}
	if res.err != nil {
		return res.err
	}
	fmt.Printf("DNS load, %s of dnsperf -c 8 -q 100 per query set (load average after: %s):\n%s\n", o.dnsLoad, loadAverage(), indent(res.out))
	peak.print("under DNS load (largest VmRSS of the 250 ms readings)", bin)
	printGC(gc)
	time.Sleep(o.rest)
	after, err := readMemory(pid)
	if err != nil {
		return err
	}
	after.print(fmt.Sprintf("%s after the DNS load", o.rest), bin)
	printGC(gc)
	if ms, err := memStats(l, &m.Pods["productpage"].NS); err == nil {
		fmt.Printf("  MemStats (binary figures in MiB): %s\n", ms)
	}
	return nil
}

func (o options) profileDir(l *lab.Lab) string {
	if o.profiles != "" {
		return o.profiles
	}
	return l.Dir
}

func printGC(gc *gcTrace) {
	line, n := gc.last()
	if n == 0 {
		fmt.Println("  Go runtime (gctrace): no GC yet in this agent process")
		return
	}
	fmt.Printf("  Go runtime (gctrace, last of %d GCs): %s\n", n, line)
	for _, r := range gc.released() {
		fmt.Printf("  agent: %s\n", r)
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
