package interop

import (
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// proxyStatusRow is one row of `istioctl proxy-status --verbosity 1`:
// the proxy's name and each column's value by header.
type proxyStatusRow struct {
	name string
	cols map[string]string
}

// parseProxyStatus splits istioctl's table (tabwriter-aligned, values may
// hold spaces: "SYNCED (0s)", "NOT SENT") at the header's column starts.
func parseProxyStatus(out string) []proxyStatusRow {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NAME ") {
		return nil
	}
	header := lines[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); i++ {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			end := strings.Index(header[i:], "  ")
			if end < 0 {
				end = len(header) - i
			}
			names = append(names, strings.TrimSpace(header[i:i+end]))
			starts = append(starts, i)
			i += end
		}
	}
	var rows []proxyStatusRow
	for _, l := range lines[1:] {
		r := proxyStatusRow{cols: map[string]string{}}
		for j, name := range names {
			lo, hi := min(starts[j], len(l)), len(l)
			if j+1 < len(starts) {
				hi = min(starts[j+1], len(l))
			}
			r.cols[name] = strings.TrimSpace(l[lo:hi])
		}
		r.name = r.cols["NAME"]
		rows = append(rows, r)
	}
	return rows
}

// proxyStatusSynced: Istio's `istioctl proxy-status --verbosity 1` (a
// column per type), talking xDS to the control plane's plaintext port
// (debug auth off), lists the pod, one row per xDS stream of it; the
// proxyless client's four types are SYNCED on one of them, and no type of
// any row is STALE, ERROR or NOT SENT.
func proxyStatusSynced(t *testing.T, xdsAddr string, p *pod) {
	id := p.name + "." + p.namespace
	node := "sidecar~" + podIP + "~" + id + "~" + p.namespace + ".svc.cluster.local"
	var out, problem string
	var err error
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last istioctl proxy-status (err %v): %s\n%s", err, problem, out)
		}
	})
	var rows []proxyStatusRow
	polltest.Within(t, 30*time.Second, "istioctl proxy-status lists "+id+" SYNCED", func() bool {
		out, err = istioctl(t, xdsAddr, "proxy-status", "--verbosity", "1")
		if err != nil {
			return false
		}
		rows = nil
		for _, r := range parseProxyStatus(out) {
			if r.name == id || r.name == node {
				rows = append(rows, r)
			}
		}
		problem = "no row for " + id
		synced := map[string]bool{}
		for _, r := range rows {
			for col, v := range r.cols {
				if strings.HasPrefix(v, "STALE") || strings.HasPrefix(v, "ERROR") || v == "NOT SENT" {
					problem = col + " " + v
					return false
				}
				if strings.HasPrefix(v, "SYNCED") {
					synced[col] = true
				}
			}
		}
		for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
			if !synced[typ] {
				if len(rows) > 0 {
					problem = typ + " not SYNCED on any row"
				}
				return false
			}
		}
		return true
	})
	if len(rows) > 1 {
		// Without Envoy, Skiff's agent keeps its own upstream stream for
		// the NameTable (and CDS, for SRV ports) beside the proxyless
		// app's; Istio's asks for the NameTable on the app's stream.
		t.Logf("the pod has %d xDS streams at the control plane", len(rows))
	}
	for _, r := range rows {
		if r.name == node {
			t.Errorf("syncz names the proxy %q; Istio names it %q", node, id)
		}
	}
	t.Logf("istioctl proxy-status:\n%s", out)
}
