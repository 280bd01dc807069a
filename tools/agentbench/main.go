// Command agentbench measures pilot-agent as it runs in a pod: the stripped
// binary's size, the time from exec to ready (workload certificate from
// istiod's CA, first NameTable, xDS connected) and the idle resident memory,
// with istiod in a node namespace of a lab. Run as root: make bench-agent.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

func main() {
	runs := flag.Int("runs", 10, "agent starts to time")
	idle := flag.Duration("idle", 10*time.Second, "how long the agent idles before its RSS is read")
	flag.Parse()
	if err := run(*runs, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

func run(runs int, idle time.Duration) error {
	l, err := lab.New("10.48.0.0/24", nil)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Build(".", "./cmd/istiod", "./cmd/pilot-agent", "./cmd/istio-iptables", "./examples/grpc-app"); err != nil {
		return err
	}
	// Ship-size binary, as `make build` makes it.
	stripped := filepath.Join(l.Dir, "pilot-agent-stripped")
	if err := lab.GoBuild(".", stripped, "./cmd/pilot-agent", "-ldflags", "-s -w"); err != nil {
		return err
	}
	st, err := os.Stat(stripped)
	if err != nil {
		return err
	}
	m, err := lab.StartMesh(l, true)
	if err != nil {
		return err
	}
	p := m.Pods["productpage"]
	var times []time.Duration
	for i := 0; i < runs; i++ {
		p.Agent.Stop(5 * time.Second)
		d, err := m.RestartAgent(p)
		if err != nil {
			return err
		}
		times = append(times, d)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	time.Sleep(idle)
	mem, err := memKB(p.Agent.Cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("binary (stripped): %.1f MB\n", float64(st.Size())/1e6)
	fmt.Printf("exec to ready, %d runs: median %s, min %s, max %s (polled every 2 ms)\n", runs,
		times[len(times)/2].Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	fmt.Printf("idle RSS after %s: %.1f MB (anonymous %.1f MB, file-backed %.1f MB: the binary's pages)\n", idle,
		float64(mem["VmRSS:"])/1024, float64(mem["RssAnon:"])/1024, float64(mem["RssFile:"])/1024)
	return nil
}

// memKB reads the memory lines of /proc/PID/status, in kB.
func memKB(pid int) (map[string]int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "Rss") || len(f) >= 2 && f[0] == "VmRSS:" {
			out[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	return out, nil
}
