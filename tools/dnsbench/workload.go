package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// workload is the names both servers answer, as files for dnsmasq and
// dnsperf, and as a NameTable for the proxy.
type workload struct {
	table         *nds.NameTable
	meshHosts     string // hosts file: mesh names, for the comparison dnsmasq
	upstreamHosts string // hosts file: forwarded names, for the upstream
	meshQueries   string // dnsperf input
	fwdQueries    string // dnsperf input
}

// writeWorkload makes n mesh services spread over 10 namespaces and n
// forwarded names under bench.test.
func writeWorkload(dir string, n int) (*workload, error) {
	w := &workload{
		table:         &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}},
		meshHosts:     filepath.Join(dir, "mesh.hosts"),
		upstreamHosts: filepath.Join(dir, "upstream.hosts"),
		meshQueries:   filepath.Join(dir, "mesh.queries"),
		fwdQueries:    filepath.Join(dir, "fwd.queries"),
	}
	var meshHosts, upHosts, meshQ, fwdQ strings.Builder
	for i := range n {
		short, ns := fmt.Sprintf("svc-%d", i), fmt.Sprintf("ns-%d", i%10)
		host := short + "." + ns + ".svc.cluster.local"
		ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
		w.table.Table[host] = &nds.NameTable_NameInfo{Ips: []string{ip}, Registry: "Kubernetes", Shortname: short, Namespace: ns}
		fmt.Fprintf(&meshHosts, "%s %s\n", ip, host)
		fmt.Fprintf(&meshQ, "%s A\n", host)
		fwd := fmt.Sprintf("host-%d.bench.test", i)
		fmt.Fprintf(&upHosts, "192.0.%d.%d %s\n", (i>>8)&0xff, i&0xff, fwd)
		fmt.Fprintf(&fwdQ, "%s A\n", fwd)
	}
	for path, body := range map[string]string{
		w.meshHosts: meshHosts.String(), w.upstreamHosts: upHosts.String(),
		w.meshQueries: meshQ.String(), w.fwdQueries: fwdQ.String(),
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("write workload: %w", err)
		}
	}
	return w, nil
}
