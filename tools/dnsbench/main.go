// Command dnsbench measures the Skiff DNS proxy against dnsmasq with Debian's
// dnsperf on this machine: maximum QPS and server CPU per query, and latency
// percentiles at half of each server's maximum, for mesh names and for
// forwarded names with a warm cache. Both servers get the same names,
// upstream and load, in the same run, each in its own process. It needs
// dnsmasq and dnsperf on PATH, runs as root (dnsmasq --user=root) and only
// uses loopback.
//
//	go run ./tools/dnsbench -duration 10s
//
// It prints a Markdown report on stdout (progress goes to stderr).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// options are the benchmark's knobs.
type options struct {
	duration    time.Duration
	rounds      int
	names       int
	clients     int
	threads     int
	outstanding int
	rate        int
	serve       serveOptions
	burn        float64
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each dnsperf run")
	flag.IntVar(&o.rounds, "rounds", 3, "runs per server and name set, at the maximum rate and at half of it, alternating servers; medians are reported")
	flag.IntVar(&o.names, "names", 1000, "number of mesh names and of forwarded names")
	flag.IntVar(&o.clients, "clients", 8, "dnsperf -c: client sockets")
	flag.IntVar(&o.threads, "threads", 1, "dnsperf -T: threads")
	flag.IntVar(&o.outstanding, "outstanding", 100, "dnsperf -q: queries in flight")
	flag.IntVar(&o.rate, "latency-rate", 0, "offered QPS of the latency runs (default: half of each server's maximum)")
	flag.StringVar(&o.serve.addr, "serve", "", "run only the proxy on this ip:port (used by the benchmark itself; also for profiling, with pprof on localhost:6060)")
	flag.StringVar(&o.serve.upstream, "serve-upstream", "", "with -serve: upstream nameserver ip:port")
	flag.StringVar(&o.serve.table, "serve-table", "", "with -serve: NameTable as JSON, as /debug/ndsz writes it (default: the benchmark's mesh names)")
	flag.IntVar(&o.serve.readers, "serve-readers", 0, "with -serve: UDP readers (default GOMAXPROCS)")
	flag.BoolVar(&o.serve.pprof, "serve-pprof", false, "with -serve: pprof on localhost:6060")
	flag.Float64Var(&o.burn, "burn", 0, "run only a process that keeps this share of one core busy (used by the benchmark itself)")
	flag.Parse()
	var err error
	switch {
	case o.burn != 0:
		err = burn(o.burn)
	case o.serve.addr != "":
		err = serve(o.serve, o.names)
	default:
		err = run(context.Background(), o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dnsbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	for _, tool := range []string{"dnsmasq", "dnsperf"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: apt-get install -y %s", tool, map[string]string{"dnsmasq": "dnsmasq-base", "dnsperf": "dnsperf"}[tool])
		}
	}
	dir, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	w, err := writeWorkload(dir, o.names)
	if err != nil {
		return err
	}
	upstream, err := startDnsmasq(ctx, "upstream", "127.0.53.1", "--addn-hosts="+w.upstreamHosts, "--local-ttl=3600", "--cache-size=0")
	if err != nil {
		return err
	}
	defer upstream.stop()
	// The comparison: dnsmasq serving the mesh names from a hosts file and
	// forwarding the rest to the same upstream through its cache.
	rival, err := startDnsmasq(ctx, "dnsmasq", "127.0.53.2", "--addn-hosts="+w.meshHosts, "--local-ttl=30",
		"--cache-size=10000", fmt.Sprintf("--server=/bench.test/%s", upstream.hashAddr()))
	if err != nil {
		return err
	}
	defer rival.stop()
	skiff, err := startSkiff(ctx, "127.0.53.3", upstream.addr(), w.tableJSON)
	if err != nil {
		return err
	}
	defer skiff.stop()
	// The forward path: an upstream whose answers have TTL 0, so nothing
	// is cached and every query crosses the proxy to the upstream. The
	// comparison is that upstream answered directly.
	direct, err := startDnsmasq(ctx, "dnsmasq direct", "127.0.53.4", "--addn-hosts="+w.upstreamHosts, "--local-ttl=0", "--cache-size=0")
	if err != nil {
		return err
	}
	defer direct.stop()
	skiff0, err := startSkiff(ctx, "127.0.53.5", direct.addr(), w.tableJSON)
	if err != nil {
		return err
	}
	defer skiff0.stop()
	// Another forwarder in front of the same upstream: dnsmasq without its
	// cache, so what forwarding costs in C is beside what it costs us.
	fwd0, err := startDnsmasq(ctx, "dnsmasq forwarding", "127.0.53.6", "--cache-size=0", "--server="+direct.hashAddr())
	if err != nil {
		return err
	}
	defer fwd0.stop()

	cases := []benchCase{
		{name: "mesh names", file: w.meshQueries, servers: []*server{skiff, rival}},
		{name: "forwarded, upstream TTL 3600 (cache)", file: w.fwdQueries, servers: []*server{skiff, rival}},
		{name: "forwarded, upstream TTL 0 (no cache)", file: w.fwdQueries, servers: []*server{skiff0, fwd0, direct},
			upstream: direct, burnFor: skiff0},
	}
	p := dnsperf{clients: o.clients, threads: o.threads, outstanding: o.outstanding}
	for _, c := range cases {
		for _, s := range c.servers {
			status("warming %s: %s", s.name, c.name)
			if _, err := p.run(ctx, s, c.file, 0, 0); err != nil {
				return err
			}
		}
	}
	rep := report{o: o, load: loadAverage(), baseline: map[string]string{}}
	for _, c := range cases {
		rep.baseline[c.name] = c.servers[len(c.servers)-1].name
		for round := range o.rounds {
			for _, s := range c.servers {
				status("max rate, round %d: %s, %s", round+1, s.name, c.name)
				r, err := p.run(ctx, s, c.file, o.duration, 0)
				if err != nil {
					return err
				}
				rep.add(&rep.max, c.name, s.name, 0, r)
			}
		}
	}
	for _, c := range cases {
		// Every server of a case at the same offered load: half the
		// baseline's maximum, so latencies compare like for like.
		rate := int(rep.median(c.name, rep.baseline[c.name]).qps / 2)
		if o.rate > 0 {
			rate = o.rate
		}
		// As many rounds as at the maximum, alternating servers: one
		// run's p99 moves by 2x or more on two shared cores.
		for round := range o.rounds {
			var burnt float64 // cores c.burnFor spent in this round
			for _, s := range c.servers {
				status("latency at %d qps, round %d: %s, %s", rate, round+1, s.name, c.name)
				r, up, err := p.runBeside(ctx, s, c.upstream, c.file, o.duration, rate)
				if err != nil {
					return err
				}
				rep.addHalf(c.name, s.name, rate, r, up, 0)
				if s == c.burnFor {
					burnt = r.cpuPerQuery.Seconds() * r.qps
				}
			}
			if c.burnFor == nil {
				continue
			}
			// The baseline again, with the CPU c.burnFor spent burned
			// beside it (one core at most).
			base := c.servers[len(c.servers)-1]
			cores := min(burnt, 1)
			status("latency at %d qps, round %d: %s beside %.2f cores burned, %s", rate, round+1, base.name, cores, c.name)
			stop, err := startBurner(ctx, cores)
			if err != nil {
				return err
			}
			r, up, err := p.runBeside(ctx, base, c.upstream, c.file, o.duration, rate)
			stop()
			if err != nil {
				return err
			}
			rep.addHalf(c.name, base.name+", "+c.burnFor.name+"'s CPU burned beside it", rate, r, up, cores)
		}
	}
	rep.loadAfter = loadAverage()
	rep.write(out)
	return nil
}

// benchCase is one dnsperf input file and the servers that answer it; the
// last server is the baseline the others are compared with.
type benchCase struct {
	name, file string
	servers    []*server
	// upstream, when set, is probed during every half-load run (its
	// latency while each server runs at that load), and the baseline runs
	// once more per round beside a process burning the CPU burnFor spent.
	upstream, burnFor *server
}

// status prints progress on stderr.
func status(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dnsbench: "+format+"\n", args...)
}

// loadAverage returns the 1-minute load average and the CPU count.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0] + fmt.Sprintf(" (%d CPUs)", runtime.NumCPU())
}
