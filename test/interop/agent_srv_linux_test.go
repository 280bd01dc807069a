package interop

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// skiffAgentSRV: Skiff's DNS proxy answers SRV for the Service's ports
// itself, from the NameTable and the ports of its outbound clusters
// (pkg/agent/dnsproxy table.go addSRV): the service name lists every port,
// _PORT._tcp.NAME the one.
func skiffAgentSRV(t *testing.T, p *pod, upstream *upstreamDNS) {
	name := "reviews." + p.namespace + ".svc.cluster.local"
	want := []string{dns.Fqdn(name) + ":9080"}
	for _, q := range []string{name, "_9080._tcp." + name} {
		var got []string
		polltest.Within(t, 30*time.Second, "SRV answer for "+q, func() bool {
			resp := p.query(t, q, dns.TypeSRV)
			got = nil
			if resp != nil {
				got = srvPorts(resp)
			}
			return slices.Equal(got, want)
		})
		if upstream.wasAsked(q, dns.TypeSRV) {
			t.Errorf("SRV %s was forwarded upstream; want it answered from the NameTable", q)
		}
	}
	// Kubernetes DNS names a port by its name (_grpc._tcp.NAME). Skiff's
	// agent learns ports from cluster names (outbound|9080||NAME), which
	// carry no port name, so it answers only the numeric label and
	// forwards the named one.
	q := "_grpc._tcp." + name
	resp := p.query(t, q, dns.TypeSRV)
	if resp != nil && slices.Equal(srvPorts(resp), want) {
		return
	}
	if upstream.wasAsked(q, dns.TypeSRV) {
		t.Logf("GAP: Skiff's agent does not answer SRV %s (the port's name): forwarded upstream", q)
		return
	}
	t.Errorf("SRV %s: neither answered (%v) nor forwarded upstream", q, resp)
}

// istioAgentSRV: Istio 1.31's DNS proxy answers only A and AAAA from the
// NameTable (pkg/dns/client LookupTable.lookupHost returns "not found" for
// any other type, and _PORT._tcp.NAME is not a table host): SRV questions,
// for the service name and for its ports, go to the upstream resolver,
// whose answer (NXDOMAIN here) the pod gets.
func istioAgentSRV(t *testing.T, p *pod, upstream *upstreamDNS) {
	name := "reviews." + p.namespace + ".svc.cluster.local"
	for _, q := range []string{name, "_grpc._tcp." + name, "_9080._tcp." + name} {
		resp := p.query(t, q, dns.TypeSRV)
		if resp == nil {
			t.Errorf("SRV %s: no answer", q)
			continue
		}
		if got := srvPorts(resp); len(got) != 0 {
			t.Errorf("SRV %s answered %v; Istio 1.31's agent answers SRV only from upstream", q, got)
		}
		if resp.Rcode != dns.RcodeNameError {
			t.Errorf("SRV %s: rcode %s, want the upstream's NXDOMAIN", q, dns.RcodeToString[resp.Rcode])
		}
		if !upstream.wasAsked(q, dns.TypeSRV) {
			t.Errorf("SRV %s was not forwarded upstream", q)
		}
	}
	t.Log("Istio 1.31's agent does not answer SRV for mesh services: it forwards SRV upstream")
}
