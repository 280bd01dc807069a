package dnsproxy

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// searchNames are how an app in namespace default spells a service.
var searchNames = []string{"reviews", "reviews.default", "reviews.default.svc", "reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local."}

// TestSearchWalk walks the search list like the C library (ndots:5, as
// Kubernetes sets it) and counts the queries each name costs.
func TestSearchWalk(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	cc := &dns.ClientConfig{Search: testSearch, Ndots: 5}
	for _, name := range searchNames {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			queries := 0
			var answer *dns.Msg
			for _, candidate := range cc.NameList(name) {
				queries++
				r := ask(t, "udp", addr4(s), candidate, qtype, 0)
				if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
					answer = r
					break
				}
			}
			if answer == nil {
				t.Fatalf("%s %s did not resolve", name, dns.TypeToString[qtype])
			}
			if queries > 2 {
				t.Errorf("%s %s took %d queries, want at most 2", name, dns.TypeToString[qtype], queries)
			}
			if got := addrsOf(answer); len(got) != 1 || (got[0] != "10.0.0.1" && got[0] != "fd00::1") {
				t.Errorf("%s %s resolved to %v", name, dns.TypeToString[qtype], got)
			}
		}
	}
}

// TestSearchWalkDig lets dig walk the search list from a pod-like network
// namespace whose resolv.conf points at the proxy.
func TestSearchWalkDig(t *testing.T) {
	requireTool(t, "dig")
	ns := netnstest.New(t)
	ns.SetResolvConf(t, "nameserver 127.0.0.1\nsearch "+strings.Join(testSearch, " ")+"\noptions ndots:5\n")
	cfg := testConfig()
	cfg.Addrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	s, err := New(cfg, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateTable(testTable())
	ns.Do(t, func() error { return s.Start(context.Background()) })
	t.Cleanup(func() { _ = s.Close() })
	for _, name := range searchNames {
		before := s.m.reqUDP.Value()
		out := ns.Exec(t, "dig", "+search", "+time=2", "+tries=1", name, "A")
		queries := s.m.reqUDP.Value() - before
		if !strings.Contains(out, "status: NOERROR") || !strings.Contains(out, "10.0.0.1") {
			t.Errorf("dig +search %s:\n%s", name, out)
		}
		if queries > 2 {
			t.Errorf("dig +search %s sent %v queries, want at most 2", name, queries)
		}
		t.Logf("%s: %v queries", name, queries)
	}
}
