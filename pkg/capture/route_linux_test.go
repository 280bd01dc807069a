package capture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// routingState is what ip shows of the rules, the routes of every table
// and lo's addresses in ns.
func routingState(t *testing.T, ns *netnstest.NS) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-6", "-o", "addr", "show", "dev", "lo"},
	} {
		fmt.Fprintf(&b, "ip %s:\n%s\n", strings.Join(args, " "), ns.Exec(t, "ip", args...))
	}
	return b.String()
}

// TestRoutingMatchesIP: TPROXY routing set up over rtnetlink leaves the
// kernel as the ip commands that Istio runs do, for a table in the rule
// header and one past 255 (an attribute); Setup is idempotent and Remove
// leaves nothing.
func TestRoutingMatchesIP(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, table := range []uint32{133, 4000} {
		t.Run(fmt.Sprint(table), func(t *testing.T) {
			t.Parallel()
			p := Policy{InboundMode: TProxy, EnableIPv6: true, TProxyMark: 1337, TProxyRouteTable: table}
			mine, ref := netnstest.New(t), netnstest.New(t)
			for _, ns := range []*netnstest.NS{mine, ref} {
				ns.Exec(t, "ip", "link", "set", "lo", "up")
			}
			for range 2 {
				mine.Do(t, func() error { return netlinkRouting{}.Setup(&p) })
			}
			tbl := fmt.Sprint(table)
			for _, args := range [][]string{
				{"-6", "addr", "add", "::6/128", "dev", "lo"},
				{"-4", "rule", "add", "fwmark", "1337", "lookup", tbl},
				{"-4", "route", "add", "local", "default", "dev", "lo", "table", tbl},
				{"-6", "rule", "add", "fwmark", "1337", "lookup", tbl},
				{"-6", "route", "add", "local", "default", "dev", "lo", "table", tbl},
			} {
				ref.Exec(t, "ip", args...)
			}
			got, want := routingState(t, mine), routingState(t, ref)
			if got != want {
				t.Errorf("after Setup twice (-ours +ip):\n%s", lineDiff(got, want))
			}
			if !strings.Contains(got, "lookup "+tbl) || !strings.Contains(got, "local default dev lo table "+tbl) {
				t.Errorf("no TPROXY routing for table %s:\n%s", tbl, got)
			}
			mine.Do(t, func() error { return netlinkRouting{}.Remove(&p) })
			assertNoRouting(t, mine)
			if out := mine.Exec(t, "ip", "-6", "addr", "show", "dev", "lo"); strings.Contains(out, "::6/128") {
				t.Errorf("::6 left on lo:\n%s", out)
			}
			// REDIRECT mode removes what TPROXY set up.
			mine.Do(t, func() error { return netlinkRouting{}.Setup(&p) })
			p.InboundMode = Redirect
			mine.Do(t, func() error { return netlinkRouting{}.Setup(&p) })
			assertNoRouting(t, mine)
		})
	}
}
