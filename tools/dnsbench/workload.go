package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// workload is the names both servers answer, as files for dnsmasq and
// dnsperf, and as a NameTable for the proxy.
type workload struct {
	tableJSON     string // the proxy's NameTable
	meshHosts     string // hosts file: mesh names, for the comparison dnsmasq
	upstreamHosts string // hosts file: forwarded names, for the upstream
	meshQueries   string // dnsperf input
	fwdQueries    string // dnsperf input
}

// writeWorkload makes n mesh services spread over 10 namespaces and n
// forwarded names under bench.test.
func writeWorkload(dir string, n int) (*workload, error) {
	w := &workload{
		tableJSON:     filepath.Join(dir, "table.json"),
		meshHosts:     filepath.Join(dir, "mesh.hosts"),
		upstreamHosts: filepath.Join(dir, "upstream.hosts"),
		meshQueries:   filepath.Join(dir, "mesh.queries"),
		fwdQueries:    filepath.Join(dir, "fwd.queries"),
	}
	nt := meshTable(n)
	table, err := json.Marshal(nt)
	if err != nil {
		return nil, fmt.Errorf("marshal table: %w", err)
	}
	var meshHosts, upHosts, meshQ, fwdQ strings.Builder
	for _, host := range sortedHosts(nt) {
		fmt.Fprintf(&meshHosts, "%s %s\n", nt.Table[host].Ips[0], host)
		fmt.Fprintf(&meshQ, "%s A\n", host)
	}
	for i := range n {
		fwd := fmt.Sprintf("host-%d.bench.test", i)
		fmt.Fprintf(&upHosts, "192.0.%d.%d %s\n", (i>>8)&0xff, i&0xff, fwd)
		fmt.Fprintf(&fwdQ, "%s A\n", fwd)
	}
	for path, body := range map[string]string{
		w.tableJSON: string(table),
		w.meshHosts: meshHosts.String(), w.upstreamHosts: upHosts.String(),
		w.meshQueries: meshQ.String(), w.fwdQueries: fwdQ.String(),
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("write workload: %w", err)
		}
	}
	return w, nil
}

// meshTable is n Kubernetes services spread over namespaces ns-0..ns-9.
func meshTable(n int) *nds.NameTable {
	nt := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}}
	for i := range n {
		short, ns := fmt.Sprintf("svc-%d", i), fmt.Sprintf("ns-%d", i%10)
		ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
		nt.Table[short+"."+ns+".svc.cluster.local"] = &nds.NameTable_NameInfo{
			Ips: []string{ip}, Registry: "Kubernetes", Shortname: short, Namespace: ns,
		}
	}
	return nt
}

// sortedHosts returns the table's host names in order.
func sortedHosts(nt *nds.NameTable) []string {
	hosts := make([]string, 0, len(nt.Table))
	for h := range nt.Table {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}
