package nftables

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// kitchenSink returns a ruleset of one family that uses every match and
// target the model has, in chains where the kernel accepts them.
func kitchenSink(f ipt.Family) *ipt.Ruleset {
	a := func(v4, v6 string) ipt.Addr {
		if f == ipt.IPv6 {
			return pfx(v6)
		}
		return pfx(v4)
	}
	not := func(x ipt.Addr) ipt.Addr { x.Not = true; return x }
	onIP := netip.MustParseAddr("127.0.0.1")
	unspec := netip.IPv4Unspecified()
	if f == ipt.IPv6 {
		onIP, unspec = netip.MustParseAddr("::1"), netip.IPv6Unspecified()
	}
	tcp, udp := "tcp", "udp"
	r := func(table, chain string, m ipt.Match, t ipt.Target) ipt.Rule {
		return ipt.Rule{Table: table, Chain: chain, Match: m, Target: t, Purpose: "kitchen sink"}
	}
	return &ipt.Ruleset{
		Family: f,
		Chains: []ipt.ChainRef{
			{Table: ipt.NAT, Chain: "ISTIO_OUTPUT"}, {Table: ipt.NAT, Chain: "ISTIO_REDIRECT"},
			{Table: ipt.Mangle, Chain: "ISTIO_TPROXY"}, {Table: ipt.Mangle, Chain: "ISTIO_DROP"},
			{Table: ipt.Raw, Chain: "ISTIO_OUTPUT_DNS"},
		},
		Rules: []ipt.Rule{
			r(ipt.NAT, "PREROUTING", ipt.Match{In: "eth+"}, ret),
			r(ipt.NAT, "PREROUTING", ipt.Match{In: "veth0", Dst: a("10.96.0.0/12", "2001:db8::/33")}, ipt.JumpTo("ISTIO_REDIRECT")),
			r(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.JumpTo("ISTIO_OUTPUT")),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Out: "lo", Src: a("127.0.0.6/32", "::6/128")}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Dst: not(a("0.0.0.0/0", "::/0"))}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Proto: tcp, SPort: ipt.Ports(rng(1000, 2000)), DPort: ipt.NotPorts(rng(3000, 4000))}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Proto: udp, SPort: ipt.NotPorts(ipt.Port(53)), DPort: ipt.Ports(ipt.Port(5353))}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{ipt.Port(80), ipt.Port(443), rng(8000, 8100)}}, ipt.JumpTo("ISTIO_REDIRECT")),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{rng(0, 10), rng(65000, 65535)}, NotMultiDPorts: true}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{ipt.Port(53), ipt.Port(15008)}, NotMultiDPorts: true,
				Owners: []ipt.Owner{{ID: 1337}, {GID: true, ID: 1338, Not: true}}}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Owners: []ipt.Owner{{GID: true, ID: 101, Not: true}, {GID: true, ID: 202, Not: true}}}, ret),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Dst: a("192.168.1.0/24", "fd00:1::/64")}, accept),
			r(ipt.NAT, "ISTIO_OUTPUT", ipt.Match{Dst: not(a("10.1.2.0/23", "fd00::/8"))}, ipt.JumpTo("ISTIO_REDIRECT")),
			r(ipt.NAT, "ISTIO_REDIRECT", ipt.Match{Proto: tcp}, ipt.Target{Kind: ipt.Redirect, Port: 15001}),
			r(ipt.Mangle, "PREROUTING", ipt.Match{CTState: "INVALID"}, ipt.JumpTo("ISTIO_DROP")),
			r(ipt.Mangle, "PREROUTING", ipt.Match{Proto: tcp, CTState: "NEW,UNTRACKED", Mark: &ipt.MarkMatch{Value: 1, Not: true}, ConnMark: &ipt.MarkMatch{Value: 2}}, ipt.JumpTo("ISTIO_TPROXY")),
			r(ipt.Mangle, "PREROUTING", ipt.Match{Proto: tcp, Mark: &ipt.MarkMatch{Value: 0x539}}, ipt.Target{Kind: ipt.SaveConnMark}),
			r(ipt.Mangle, "ISTIO_DROP", ipt.Match{}, ipt.Target{Kind: ipt.Drop}),
			r(ipt.Mangle, "ISTIO_TPROXY", ipt.Match{Dst: not(a("127.0.0.1/32", "::1/128")), Proto: tcp}, ipt.Target{Kind: ipt.TProxy, Port: 15006, Mark: 0x539, OnIP: unspec}),
			r(ipt.Mangle, "ISTIO_TPROXY", ipt.Match{Proto: tcp}, ipt.Target{Kind: ipt.TProxy, Port: 15007, Mark: 1, OnIP: onIP}),
			r(ipt.Mangle, "OUTPUT", ipt.Match{Proto: tcp, ConnMark: &ipt.MarkMatch{Value: 0x539}}, ipt.Target{Kind: ipt.RestoreConnMark}),
			r(ipt.Mangle, "OUTPUT", ipt.Match{Out: "lo"}, ipt.Target{Kind: ipt.SetMark, Mark: 0x53a}),
			r(ipt.Mangle, "OUTPUT", ipt.Match{ConnMark: &ipt.MarkMatch{Value: 1, Not: true}}, accept),
			r(ipt.Raw, "OUTPUT", ipt.Match{}, ipt.JumpTo("ISTIO_OUTPUT_DNS")),
			r(ipt.Raw, "ISTIO_OUTPUT_DNS", ipt.Match{Proto: udp, DPort: ipt.Ports(ipt.Port(53)), Owners: []ipt.Owner{{ID: 1337}}}, ipt.Target{Kind: ipt.CTZone, Zone: 1}),
			r(ipt.Raw, "ISTIO_OUTPUT_DNS", ipt.Match{Proto: udp, DPort: ipt.Ports(ipt.Port(53)), Dst: a("10.96.0.10/32", "fd00::10/128")}, ipt.Target{Kind: ipt.CTZone, Zone: 2}),
			r(ipt.Raw, "PREROUTING", ipt.Match{Proto: udp, SPort: ipt.Ports(ipt.Port(53)), Src: a("10.96.0.10/32", "fd00::10/128")}, ipt.Target{Kind: ipt.CTZone, Zone: 1}),
		},
	}
}

func kitchenProgram(t *testing.T, families ...ipt.Family) *Program {
	t.Helper()
	var sets []*ipt.Ruleset
	for _, f := range families {
		sets = append(sets, kitchenSink(f))
	}
	p, err := Translate(sets)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nsFD opens the namespace for Options.NetNS.
func nsFD(t *testing.T, ns *netnstest.NS) Options {
	t.Helper()
	f, err := os.Open(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Options{NetNS: int(f.Fd())}
}

func gen(t *testing.T, o Options) uint32 {
	t.Helper()
	g, err := Generation(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func apply(t *testing.T, p *Program, o Options) Result {
	t.Helper()
	res, err := Apply(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var ruleHeader = regexp.MustCompile(`^(inet \S+ \S+)( \d+)+$`)

// expressions returns the kernel's expressions for every rule and set, as
// nft's netlink debug output prints them, minus handles and user data.
func expressions(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.Split(ns.Exec(t, "nft", "--debug=netlink", "list", "ruleset"), "\n") {
		switch {
		case strings.HasPrefix(l, "inet "):
			b.WriteString(ruleHeader.ReplaceAllString(l, "$1") + "\n")
		case strings.HasPrefix(l, "\telement "):
			// nft flags an interval open to the last port in the element's
			// user data, which only its printer reads (and which the netlink
			// library cannot send); it lists the set the same without.
			l, _, _ = strings.Cut(l, "  userdata = ")
			b.WriteString(l + "\n")
		case strings.HasPrefix(l, "  [ "), strings.HasPrefix(l, "table "), strings.HasPrefix(l, "\t"), l == "}":
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestApplyMatchesNFT programs every match and target through netlink and
// checks them against nft itself: nft lists exactly our rendering, and
// loading our script with "nft -f" gives the very same expressions.
func TestApplyMatchesNFT(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, fams := range [][]ipt.Family{{ipt.IPv4}, {ipt.IPv6}, {ipt.IPv4, ipt.IPv6}} {
		t.Run(fmt.Sprint(fams), func(t *testing.T) {
			t.Parallel()
			p := kitchenProgram(t, fams...)
			ns := netnstest.New(t)
			if res := apply(t, p, nsFD(t, ns)); !res.Changed {
				t.Fatal("first apply changed nothing")
			}
			if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
				t.Errorf("nft lists:\n%s\nwant:\n%s", got, p.String())
			}
			ref := netnstest.New(t)
			script := filepath.Join(t.TempDir(), "rules.nft")
			if err := os.WriteFile(script, []byte(p.Script()), 0o644); err != nil {
				t.Fatal(err)
			}
			ref.Exec(t, "nft", "-f", script)
			if got := ref.Exec(t, "nft", "list", "ruleset"); got != p.String() {
				t.Errorf("after nft -f of the script, nft lists:\n%s\nwant:\n%s", got, p.String())
			}
			if diff := cmp.Diff(strings.Split(expressions(t, ref), "\n"), strings.Split(expressions(t, ns), "\n")); diff != "" {
				t.Errorf("netlink expressions differ from nft -f of the script (-nft +ours):\n%s", diff)
			}
			// Rules loaded by nft carry no fingerprints: Apply takes them over.
			o := nsFD(t, ref)
			if ok, err := InSync(p, o); err != nil || ok {
				t.Errorf("InSync on nft's copy = %v, %v; want false", ok, err)
			}
			if res := apply(t, p, o); !res.Changed {
				t.Error("apply over nft's copy changed nothing")
			}
		})
	}
}

// TestApplyIsIdempotent: a second Apply commits nothing; Force commits.
func TestApplyIsIdempotent(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	o := nsFD(t, ns)
	p := kitchenProgram(t, ipt.IPv4, ipt.IPv6)
	apply(t, p, o)
	g := gen(t, o)
	if ok, err := InSync(p, o); err != nil || !ok {
		t.Fatalf("InSync after apply = %v, %v", ok, err)
	}
	if res := apply(t, p, o); res.Changed {
		t.Error("second apply reports a change")
	}
	if got := gen(t, o); got != g {
		t.Errorf("second apply committed %d transactions", got-g)
	}
	force := o
	force.Force = true
	if res := apply(t, p, force); !res.Changed {
		t.Error("forced apply reports no change")
	}
	if got := gen(t, o); got != g+1 {
		t.Errorf("forced apply committed %d transactions, want 1", got-g)
	}
	if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
		t.Errorf("after forced apply nft lists:\n%s", got)
	}
}

// TestApplyAndCleanupLeaveOthersAlone: tables that are not ours (other
// names, or our names in another family) survive Apply and Cleanup; tables
// of ours that the program drops go in the same transaction.
func TestApplyAndCleanupLeaveOthersAlone(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	o := nsFD(t, ns)
	for _, cmd := range []string{
		"add table inet foreign",
		"add chain inet foreign out { type nat hook output priority -100; policy accept; }",
		"add rule inet foreign out ip daddr 192.0.2.1 tcp dport 80 redirect to :8080",
		"add table ip istio-proxy-nat",
		"add chain ip istio-proxy-nat mine",
		"add table inet istio-proxy-other",
	} {
		ns.Exec(t, "nft", cmd)
	}
	foreign := func() string {
		return ns.Exec(t, "nft", "list", "table", "inet", "foreign") +
			ns.Exec(t, "nft", "list", "table", "ip", "istio-proxy-nat") +
			ns.Exec(t, "nft", "list", "table", "inet", "istio-proxy-other")
	}
	before := foreign()

	all := kitchenProgram(t, ipt.IPv4)
	apply(t, all, o)
	natOnly := &Program{Tables: []*Table{all.Table(TableNAT)}}
	g := gen(t, o)
	res := apply(t, natOnly, o)
	if want := []string{TableMangle, TableRaw}; !slices.Equal(res.Removed, want) {
		t.Errorf("Removed = %v, want %v", res.Removed, want)
	}
	if got := gen(t, o); got != g+1 {
		t.Errorf("dropping tables took %d transactions, want 1", got-g)
	}
	if got := ns.Exec(t, "nft", "list", "table", "inet", TableNAT); got != natOnly.String() {
		t.Errorf("nat table:\n%s\nwant:\n%s", got, natOnly.String())
	}
	present, err := Present(o)
	if err != nil || !slices.Equal(present, []string{TableNAT}) {
		t.Errorf("Present = %v, %v; want [%s]", present, err, TableNAT)
	}

	removed, err := Cleanup(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{TableNAT}) {
		t.Errorf("Cleanup removed %v", removed)
	}
	g = gen(t, o)
	if removed, err := Cleanup(o); err != nil || removed != nil {
		t.Errorf("second Cleanup = %v, %v", removed, err)
	}
	if got := gen(t, o); got != g {
		t.Errorf("second Cleanup committed %d transactions", got-g)
	}
	if after := foreign(); after != before {
		t.Errorf("foreign tables changed:\n%s\nwant:\n%s", after, before)
	}
	// An empty program is a cleanup too.
	apply(t, all, o)
	if res := apply(t, &Program{}, o); !res.Changed || len(res.Removed) != 3 {
		t.Errorf("empty program: %+v", res)
	}
	if after := foreign(); after != before {
		t.Errorf("foreign tables changed:\n%s\nwant:\n%s", after, before)
	}
}

// TestApplyConcurrently programs many namespaces at once, each through its
// own namespace descriptor (run with -race).
func TestApplyConcurrently(t *testing.T) {
	netnstest.RequireRoot(t)
	p := kitchenProgram(t, ipt.IPv4, ipt.IPv6)
	var nss []*netnstest.NS
	var opts []Options
	for i := 0; i < 10; i++ {
		ns := netnstest.New(t)
		nss, opts = append(nss, ns), append(opts, nsFD(t, ns))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nss))
	for i := range nss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				if _, err := Apply(p, opts[i]); err != nil {
					errs <- fmt.Errorf("%s: %w", nss[i].Name, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, ns := range nss {
		if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
			t.Errorf("%s lists:\n%s", ns.Name, got)
		}
	}
}

// TestStaleReadFailsWhole: a table created between Apply's read and its
// commit makes the kernel reject the whole batch (EEXIST), so the tables
// are never merged; Apply then reads again and replaces them.
func TestStaleReadFailsWhole(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	o := nsFD(t, ns)
	p := kitchenProgram(t, ipt.IPv4)
	ns.Exec(t, "nft", "add table inet "+TableNAT)
	g := gen(t, o)
	c, err := dial(o.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := write(c, &state{}, p); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("commit over a table read as absent: %v, want EEXIST", err)
	}
	if got := gen(t, o); got != g {
		t.Errorf("the rejected batch committed %d transactions", got-g)
	}
	if got := ns.Exec(t, "nft", "list", "ruleset"); got != "table inet "+TableNAT+" {\n}\n" {
		t.Errorf("after the rejected batch nft lists:\n%s", got)
	}
	if res := apply(t, p, o); !res.Changed {
		t.Error("apply over the empty table changed nothing")
	}
	if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
		t.Errorf("after apply nft lists:\n%s\nwant:\n%s", got, p.String())
	}
}

// TestCommitNamesTheFailingMessage: an error answer names the message the
// kernel refused, and nothing of the batch is committed.
func TestCommitNamesTheFailingMessage(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	o := nsFD(t, ns)
	p := kitchenProgram(t, ipt.IPv4)
	nat := p.Table(TableNAT)
	// Without its chain istio-redirect, the jumps to it are refused.
	var chains []*Chain
	for _, c := range nat.Chains {
		if c.Name != "istio-redirect" {
			chains = append(chains, c)
		}
	}
	broken := &Program{Tables: []*Table{{Name: nat.Name, Chains: chains}}}
	g := gen(t, o)
	_, err := Apply(broken, o)
	if err == nil || !strings.Contains(err.Error(), "jump istio-redirect") {
		t.Errorf("Apply of a jump to a missing chain: %v", err)
	}
	if got := gen(t, o); got != g {
		t.Errorf("the failed batch committed %d transactions", got-g)
	}
}

// BenchmarkApplyFresh programs every match and target of both families into
// a new namespace: the first install, one query and one batch.
func BenchmarkApplyFresh(b *testing.B) {
	netnstest.RequireRoot(b)
	var sets []*ipt.Ruleset
	for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
		sets = append(sets, kitchenSink(f))
	}
	p, err := Translate(sets)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := netnstest.UniqueName("skb-")
		netnstest.Run(b, "ip", "netns", "add", name)
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Apply(p, Options{NetNS: int(f.Fd())}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		f.Close()
		netnstest.Run(b, "ip", "netns", "del", name)
		b.StartTimer()
	}
	b.ReportMetric(float64(p.RuleCount()), "rules")
}
