package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

// initCost runs `pilot-agent version` with GODEBUG=inittrace=1: the
// resident set of a process that only runs the package initialisers (its
// peak, from GNU time, which forks it from its own small process: Go's
// exec shares this process's memory until exec, and Linux counts that in
// the child's peak) and the bytes those initialisers allocate, with the
// largest packages.
func initCost(dir, bin string) (maxRSSKB int, allocated int, top []string, err error) {
	timeOut := filepath.Join(dir, "agentbench-time.txt")
	cmd := exec.Command("/usr/bin/time", "-o", timeOut, "-f", "%M", bin, "version")
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, nil, fmt.Errorf("/usr/bin/time %s version: %w: %s", bin, err, stderr.String())
	}
	b, err := os.ReadFile(timeOut)
	if err != nil {
		return 0, 0, nil, err
	}
	if maxRSSKB, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return 0, 0, nil, fmt.Errorf("GNU time's %%M %q: %w", b, err)
	}
	type pkg struct {
		name  string
		bytes int
	}
	var pkgs []pkg
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "init" || f[len(f)-3] != "bytes," {
			continue
		}
		n, _ := strconv.Atoi(f[len(f)-4])
		allocated += n
		pkgs = append(pkgs, pkg{f[1], n})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].bytes > pkgs[j].bytes })
	for _, p := range pkgs[:min(4, len(pkgs))] {
		top = append(top, fmt.Sprintf("%s %d kB", p.name, p.bytes/1024))
	}
	return maxRSSKB, allocated, top, nil
}

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// tableCost fetches the agent's NameTable (/debug/ndsz on its status port)
// and measures, in this process, the live heap of the decoded table and of
// a DNS proxy's precomputed answers built from it, as the agent builds
// them, with the SRV answers for the generated services' port (8080), which
// the agent takes from its clusters. Call it after the agent's readings:
// the dump costs the agent heap.
func tableCost(l *lab.Lab, pod *lab.NS, namespace string, services int) (names int, tableKB, answersKB int, err error) {
	js, err := l.Get(pod, "http://127.0.0.1:15020/debug/ndsz")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("fetch the agent's NameTable: %w", err)
	}
	ports := map[string][]dnsproxy.ServicePort{}
	for i := range services {
		ports[svcHost(i)] = []dnsproxy.ServicePort{{Port: 8080}}
	}
	base := heapNow()
	nt := &nds.NameTable{}
	if err := json.Unmarshal([]byte(js), nt); err != nil {
		return 0, 0, 0, fmt.Errorf("parse the agent's NameTable: %w", err)
	}
	withTable := heapNow()
	cfg := dnsproxy.Config{
		Addrs:         []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")},
		Upstreams:     []netip.AddrPort{netip.AddrPortFrom(l.Gateway, 53)},
		SearchDomains: []string{namespace + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Namespace:     namespace,
	}
	s, err := dnsproxy.New(cfg, nil, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer s.Close()
	s.UpdateServicePorts(ports)
	s.UpdateTable(nt)
	runtime.KeepAlive(ports)
	withAnswers := heapNow()
	runtime.KeepAlive(nt)
	runtime.KeepAlive(s)
	return len(nt.Table), int(withTable-base) / 1024, int(withAnswers-withTable) / 1024, nil
}
