package nftables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

func pfx(s string) ipt.Addr           { return ipt.Addr{Prefix: netip.MustParsePrefix(s)} }
func notPfx(s string) ipt.Addr        { return ipt.Addr{Prefix: netip.MustParsePrefix(s), Not: true} }
func rng(lo, hi uint16) ipt.PortRange { return ipt.PortRange{Lo: lo, Hi: hi} }

var (
	ret    = ipt.Target{Kind: ipt.Return}
	accept = ipt.Target{Kind: ipt.Accept}
)

// TestTranslateRule covers every match field and target kind of the model.
func TestTranslateRule(t *testing.T) {
	nat, mangle, raw := ipt.NAT, ipt.Mangle, ipt.Raw
	tcp, udp := "tcp", "udp"
	cases := []struct {
		name  string
		table string
		f     ipt.Family
		m     ipt.Match
		t     ipt.Target
		want  []string
	}{
		{"input interface", nat, ipt.IPv4, ipt.Match{In: "eth0"}, ret, []string{`meta nfproto ipv4 iifname "eth0" counter packets 0 bytes 0 return`}},
		{"output interface wildcard", nat, ipt.IPv6, ipt.Match{Out: "veth+"}, ret, []string{`meta nfproto ipv6 oifname "veth*" counter packets 0 bytes 0 return`}},
		{"addresses", nat, ipt.IPv4, ipt.Match{Src: notPfx("10.1.2.3/8"), Dst: pfx("1.2.3.4/32")}, ret, []string{"ip saddr != 10.0.0.0/8 ip daddr 1.2.3.4 counter packets 0 bytes 0 return"}},
		{"v6 addresses", nat, ipt.IPv6, ipt.Match{Out: "lo", Dst: notPfx("::1/128"), Src: pfx("fd00:1::/64")}, ret, []string{`oifname "lo" ip6 saddr fd00:1::/64 ip6 daddr != ::1 counter packets 0 bytes 0 return`}},
		{"any address", nat, ipt.IPv4, ipt.Match{Dst: pfx("0.0.0.0/0")}, ret, []string{"ip daddr 0.0.0.0/0 counter packets 0 bytes 0 return"}},
		{"protocol", nat, ipt.IPv4, ipt.Match{Proto: tcp}, ret, []string{"meta nfproto ipv4 meta l4proto tcp counter packets 0 bytes 0 return"}},
		{"ports", nat, ipt.IPv4, ipt.Match{Proto: udp, SPort: ipt.NotPorts(ipt.Port(53)), DPort: ipt.Ports(rng(1000, 2000))}, ret,
			[]string{"meta nfproto ipv4 udp sport != 53 udp dport 1000-2000 counter packets 0 bytes 0 return"}},
		{"negated range", nat, ipt.IPv4, ipt.Match{Proto: tcp, DPort: ipt.NotPorts(rng(8000, 8100))}, ret, []string{"meta nfproto ipv4 tcp dport != 8000-8100 counter packets 0 bytes 0 return"}},
		{"multiport", nat, ipt.IPv4, ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{ipt.Port(443), ipt.Port(80), rng(8000, 8100), ipt.Port(80)}}, ret,
			[]string{"meta nfproto ipv4 tcp dport { 80, 443, 8000-8100 } counter packets 0 bytes 0 return"}},
		{"negated multiport", nat, ipt.IPv4, ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{ipt.Port(53), ipt.Port(15008)}, NotMultiDPorts: true}, ret,
			[]string{"meta nfproto ipv4 tcp dport != { 53, 15008 } counter packets 0 bytes 0 return"}},
		{"multiport of one", nat, ipt.IPv4, ipt.Match{Proto: tcp, MultiDPorts: []ipt.PortRange{ipt.Port(80)}, NotMultiDPorts: true}, ret,
			[]string{"meta nfproto ipv4 tcp dport != 80 counter packets 0 bytes 0 return"}},
		{"multiport ranges merge", nat, ipt.IPv4, ipt.Match{Proto: udp, MultiDPorts: []ipt.PortRange{rng(1000, 2000), rng(1500, 2500), ipt.Port(2501), ipt.Port(9)}}, ret,
			[]string{"meta nfproto ipv4 udp dport { 9, 1000-2501 } counter packets 0 bytes 0 return"}},
		{"owners", nat, ipt.IPv4, ipt.Match{Owners: []ipt.Owner{{ID: 1337}, {GID: true, ID: 101, Not: true}, {GID: true, ID: 202, Not: true}}}, ret,
			[]string{"meta nfproto ipv4 meta skuid 1337 meta skgid != 101 meta skgid != 202 counter packets 0 bytes 0 return"}},
		{"ct state", mangle, ipt.IPv4, ipt.Match{Proto: tcp, CTState: "RELATED,ESTABLISHED"}, ret, []string{"meta nfproto ipv4 meta l4proto tcp ct state established,related counter packets 0 bytes 0 return"}},
		{"ct state new untracked invalid", mangle, ipt.IPv4, ipt.Match{CTState: "UNTRACKED,NEW,INVALID"}, ret, []string{"meta nfproto ipv4 ct state invalid,new,untracked counter packets 0 bytes 0 return"}},
		{"marks", mangle, ipt.IPv4, ipt.Match{Mark: &ipt.MarkMatch{Value: 1337}, ConnMark: &ipt.MarkMatch{Value: 1, Not: true}}, ret,
			[]string{"meta nfproto ipv4 meta mark 0x00000539 ct mark != 0x00000001 counter packets 0 bytes 0 return"}},
		{"jump", nat, ipt.IPv4, ipt.Match{}, ipt.JumpTo("ISTIO_OUTPUT_DNS"), []string{"meta nfproto ipv4 counter packets 0 bytes 0 jump istio-output-dns"}},
		{"accept", mangle, ipt.IPv4, ipt.Match{}, accept, []string{"meta nfproto ipv4 counter packets 0 bytes 0 accept"}},
		{"drop", mangle, ipt.IPv4, ipt.Match{}, ipt.Target{Kind: ipt.Drop}, []string{"meta nfproto ipv4 counter packets 0 bytes 0 drop"}},
		{"redirect", nat, ipt.IPv4, ipt.Match{Proto: tcp}, ipt.Target{Kind: ipt.Redirect, Port: 15001}, []string{"meta nfproto ipv4 meta l4proto tcp counter packets 0 bytes 0 redirect to :15001"}},
		{"tproxy", mangle, ipt.IPv4, ipt.Match{Dst: notPfx("127.0.0.1/32"), Proto: tcp},
			ipt.Target{Kind: ipt.TProxy, Port: 15006, Mark: 1337, OnIP: netip.IPv4Unspecified()}, []string{
				"meta l4proto tcp ip daddr != 127.0.0.1 tproxy ip to :15006 meta mark set 0x00000539 counter packets 0 bytes 0 accept",
				"meta l4proto tcp ip daddr != 127.0.0.1 counter packets 0 bytes 0 drop",
			}},
		{"tproxy v6 to an address", mangle, ipt.IPv6, ipt.Match{Proto: tcp},
			ipt.Target{Kind: ipt.TProxy, Port: 15006, Mark: 1, OnIP: netip.MustParseAddr("fd00::1")}, []string{
				"meta nfproto ipv6 meta l4proto tcp tproxy ip6 to [fd00::1]:15006 meta mark set 0x00000001 counter packets 0 bytes 0 accept",
				"meta nfproto ipv6 meta l4proto tcp counter packets 0 bytes 0 drop",
			}},
		{"set mark", mangle, ipt.IPv4, ipt.Match{Out: "lo"}, ipt.Target{Kind: ipt.SetMark, Mark: 1338}, []string{`meta nfproto ipv4 oifname "lo" counter packets 0 bytes 0 meta mark set 0x0000053a`}},
		{"save mark", mangle, ipt.IPv4, ipt.Match{}, ipt.Target{Kind: ipt.SaveConnMark}, []string{"meta nfproto ipv4 counter packets 0 bytes 0 ct mark set meta mark"}},
		{"restore mark", mangle, ipt.IPv4, ipt.Match{}, ipt.Target{Kind: ipt.RestoreConnMark}, []string{"meta nfproto ipv4 counter packets 0 bytes 0 meta mark set ct mark"}},
		{"ct zone", raw, ipt.IPv4, ipt.Match{Proto: udp, DPort: ipt.Ports(ipt.Port(53))}, ipt.Target{Kind: ipt.CTZone, Zone: 2}, []string{"meta nfproto ipv4 udp dport 53 counter packets 0 bytes 0 ct zone set 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules, err := translateRule(ipt.Rule{Table: c.table, Chain: "OUTPUT", Match: c.m, Target: c.t, Purpose: "test"}, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rules {
				got = append(got, r.String())
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTranslateRejects(t *testing.T) {
	chains := []ipt.ChainRef{{Table: ipt.NAT, Chain: "ISTIO_OUTPUT"}, {Table: ipt.Mangle, Chain: "ISTIO_TPROXY"}}
	rule := func(table, chain string, m ipt.Match, tg ipt.Target) ipt.Rule {
		return ipt.Rule{Table: table, Chain: chain, Match: m, Target: tg}
	}
	one := func(r ipt.Rule) []*ipt.Ruleset {
		return []*ipt.Ruleset{{Family: ipt.IPv4, Chains: chains, Rules: []ipt.Rule{r}}}
	}
	cases := []struct {
		name string
		sets []*ipt.Ruleset
		want string
	}{
		{"filter table", one(rule(ipt.Filter, "INPUT", ipt.Match{}, accept)), `table "filter" has no istio-proxy nftables table`},
		{"undeclared chain", one(rule(ipt.NAT, "MINE", ipt.Match{}, ret)), "chain nat/MINE is not declared"},
		{"jump to undeclared chain", one(rule(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.JumpTo("MINE"))), "jump to MINE, which is not a declared chain"},
		{"jump across tables", one(rule(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.JumpTo("ISTIO_TPROXY"))), "jump to ISTIO_TPROXY, which is not a declared chain of table nat"},
		{"protocol", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Proto: "sctp"}, ret)), `unsupported protocol "sctp"`},
		{"port without protocol", one(rule(ipt.NAT, "OUTPUT", ipt.Match{DPort: ipt.Ports(ipt.Port(80))}, ret)), "port match without a protocol"},
		{"empty range", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Proto: "tcp", DPort: ipt.Ports(rng(9, 8))}, ret)), "port range 9:8 is empty"},
		{"empty multiport range", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Proto: "tcp", MultiDPorts: []ipt.PortRange{rng(9, 8)}}, ret)), "port range 9:8 is empty"},
		{"redirect in mangle", one(rule(ipt.Mangle, "OUTPUT", ipt.Match{Proto: "tcp"}, ipt.Target{Kind: ipt.Redirect, Port: 1})), "REDIRECT is only valid in the nat table"},
		{"redirect without protocol", one(rule(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.Target{Kind: ipt.Redirect, Port: 1})), "REDIRECT needs a protocol match"},
		{"tproxy in nat", one(rule(ipt.NAT, "PREROUTING", ipt.Match{Proto: "tcp"}, ipt.Target{Kind: ipt.TProxy, Port: 1})), "TPROXY is only valid in the mangle table"},
		{"tproxy address of the other family", one(rule(ipt.Mangle, "PREROUTING", ipt.Match{Proto: "tcp"}, ipt.Target{Kind: ipt.TProxy, Port: 1, OnIP: netip.MustParseAddr("::2")})), "TPROXY address ::2 is not an ipv4 address"},
		{"ct zone in nat", one(rule(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.Target{Kind: ipt.CTZone, Zone: 1})), "CT --zone is only valid in the raw table"},
		{"unknown target", one(rule(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.Target{Kind: 99})), "unsupported target kind 99"},
		{"address of the other family", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Dst: pfx("fd00::/8")}, ret)), "address fd00::/8 is not an ipv4 prefix"},
		{"mapped address", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Dst: pfx("::ffff:10.0.0.0/104")}, ret)), "is not an ipv4 prefix"},
		{"long interface name", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Out: "abcdefghijklmnop"}, ret)), "want 1 to 15 bytes"},
		{"quote in interface name", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Out: `a"b`}, ret)), "not supported"},
		{"bare wildcard interface", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Out: "+"}, ret)), "want 1 to 15 bytes"},
		{"ct state", one(rule(ipt.Mangle, "PREROUTING", ipt.Match{CTState: "DNAT"}, ret)), `unsupported conntrack state "DNAT"`},
		{"negated multiport without ports", one(rule(ipt.NAT, "OUTPUT", ipt.Match{Proto: "tcp", NotMultiDPorts: true}, ret)), "negated multiport match without ports"},
		{"two rulesets of a family", []*ipt.Ruleset{{Family: ipt.IPv4}, {Family: ipt.IPv4}}, "two ipv4 rulesets"},
		{"declared built-in chain", []*ipt.Ruleset{{Family: ipt.IPv4, Chains: []ipt.ChainRef{{Table: ipt.NAT, Chain: "OUTPUT"}}}}, "a built-in chain cannot be declared"},
		{"name collision", []*ipt.Ruleset{{Family: ipt.IPv4, Chains: []ipt.ChainRef{{Table: ipt.NAT, Chain: "ISTIO_X"}, {Table: ipt.NAT, Chain: "istio-x"}}}}, "would both be named istio-x"},
		{"bad chain name", []*ipt.Ruleset{{Family: ipt.IPv4, Chains: []ipt.ChainRef{{Table: ipt.NAT, Chain: "MY CHAIN"}}}}, "not a valid nftables chain name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Translate(c.sets)
			if err == nil {
				t.Fatalf("translated to\n%s\nwant an error containing %q", p, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestTranslateProgram checks the layout: tables in Istio's order, base
// chains in hook order at the iptables priorities, our chains in
// declaration order, and rules of both families installed once.
func TestTranslateProgram(t *testing.T) {
	mk := func(f ipt.Family, lo, pass string) *ipt.Ruleset {
		return &ipt.Ruleset{
			Family: f,
			Chains: []ipt.ChainRef{{Table: ipt.Raw, Chain: "ISTIO_OUTPUT_DNS"}, {Table: ipt.NAT, Chain: "ISTIO_OUTPUT"}, {Table: ipt.NAT, Chain: "ISTIO_REDIRECT"}},
			Rules: []ipt.Rule{
				{Table: ipt.Raw, Chain: "OUTPUT", Target: ipt.JumpTo("ISTIO_OUTPUT_DNS")},
				{Table: ipt.Raw, Chain: "ISTIO_OUTPUT_DNS", Match: ipt.Match{Proto: "udp", DPort: ipt.Ports(ipt.Port(53))}, Target: ipt.Target{Kind: ipt.CTZone, Zone: 2}},
				{Table: ipt.Mangle, Chain: "OUTPUT", Match: ipt.Match{Out: "lo"}, Target: ipt.Target{Kind: ipt.SetMark, Mark: 1}},
				{Table: ipt.Mangle, Chain: "PREROUTING", Match: ipt.Match{Mark: &ipt.MarkMatch{Value: 1}}, Target: ipt.Target{Kind: ipt.SaveConnMark}},
				{Table: ipt.NAT, Chain: "OUTPUT", Target: ipt.JumpTo("ISTIO_OUTPUT"), Purpose: "all outbound"},
				{Table: ipt.NAT, Chain: "PREROUTING", Match: ipt.Match{In: "eth1"}, Target: ret},
				{Table: ipt.NAT, Chain: "ISTIO_OUTPUT", Match: ipt.Match{Out: "lo", Src: pfx(pass)}, Target: ret, Purpose: "passthrough"},
				{Table: ipt.NAT, Chain: "ISTIO_OUTPUT", Match: ipt.Match{Owners: []ipt.Owner{{ID: 1337}}}, Target: ret},
				{Table: ipt.NAT, Chain: "ISTIO_OUTPUT", Match: ipt.Match{Dst: pfx(lo)}, Target: ret, Purpose: "loopback"},
				{Table: ipt.NAT, Chain: "ISTIO_OUTPUT", Target: ipt.JumpTo("ISTIO_REDIRECT")},
				{Table: ipt.NAT, Chain: "ISTIO_REDIRECT", Match: ipt.Match{Proto: "tcp"}, Target: ipt.Target{Kind: ipt.Redirect, Port: 15001}},
			},
		}
	}
	v4 := mk(ipt.IPv4, "127.0.0.1/32", "127.0.0.6/32")
	v6 := mk(ipt.IPv6, "::1/128", "::6/128")
	// An IPv4-only rule before the catch-all jump: it follows the IPv6
	// rule of the step before, as Istio writes the families step by step.
	v4.Rules = slices.Insert(v4.Rules, len(v4.Rules)-2, ipt.Rule{Table: ipt.NAT, Chain: "ISTIO_OUTPUT", Match: ipt.Match{Dst: pfx("10.0.0.0/8")}, Target: ret, Purpose: "destination 10.0.0.0/8 excluded"})
	p, err := Translate([]*ipt.Ruleset{v4, v6})
	if err != nil {
		t.Fatal(err)
	}
	want := `table inet istio-proxy-nat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "eth1" counter packets 0 bytes 0 return
	}

	chain output {
		type nat hook output priority -100; policy accept;
		counter packets 0 bytes 0 jump istio-output
	}

	chain istio-redirect {
		meta l4proto tcp counter packets 0 bytes 0 redirect to :15001
	}

	chain istio-output {
		oifname "lo" ip saddr 127.0.0.6 counter packets 0 bytes 0 return
		oifname "lo" ip6 saddr ::6 counter packets 0 bytes 0 return
		meta skuid 1337 counter packets 0 bytes 0 return
		ip daddr 127.0.0.1 counter packets 0 bytes 0 return
		ip6 daddr ::1 counter packets 0 bytes 0 return
		ip daddr 10.0.0.0/8 counter packets 0 bytes 0 return
		counter packets 0 bytes 0 jump istio-redirect
	}
}
table inet istio-proxy-mangle {
	chain prerouting {
		type filter hook prerouting priority mangle; policy accept;
		meta mark 0x00000001 counter packets 0 bytes 0 ct mark set meta mark
	}

	chain output {
		type route hook output priority mangle; policy accept;
		oifname "lo" counter packets 0 bytes 0 meta mark set 0x00000001
	}
}
table inet istio-proxy-raw {
	chain output {
		type filter hook output priority raw; policy accept;
		counter packets 0 bytes 0 jump istio-output-dns
	}

	chain istio-output-dns {
		udp dport 53 counter packets 0 bytes 0 ct zone set 2
	}
}
`
	if diff := cmp.Diff(want, p.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	script := p.Script()
	for _, s := range []string{
		"table inet istio-proxy-nat\ndelete table inet istio-proxy-nat\n",
		"table inet istio-proxy-raw\ndelete table inet istio-proxy-raw\n",
		"\t\tcounter packets 0 bytes 0 jump istio-output # all outbound\n",
		"\t\toifname \"lo\" ip6 saddr ::6 counter packets 0 bytes 0 return # passthrough\n",
	} {
		if !strings.Contains(script, s) {
			t.Errorf("script lacks %q:\n%s", s, script)
		}
	}
	if p.RuleCount() != 14 {
		t.Errorf("RuleCount = %d, want 14", p.RuleCount())
	}
}

// TestMergeKeepsEachFamilysOrder merges random rule lists and checks that
// each family sees exactly its rules in their order, and that a rule is
// shared only when both families have it and it is not family-specific.
func TestMergeKeepsEachFamilysOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	neutral := []string{"a", "b", "c", "d"}
	gen := func(f ipt.Family) []*Rule {
		var out []*Rule
		for range r.IntN(8) {
			if r.IntN(3) == 0 {
				p := netip.MustParsePrefix("10.0.0.0/8")
				if f == ipt.IPv6 {
					p = netip.MustParsePrefix("fd00::/8")
				}
				out = append(out, &Rule{Family: f, terms: []term{addrTerm{prefix: p}, verdictTerm{kind: ipt.Return}}})
				continue
			}
			out = append(out, &Rule{Family: f, terms: []term{ifnameTerm{name: neutral[r.IntN(len(neutral))]}, verdictTerm{kind: ipt.Return}}})
		}
		return out
	}
	project := func(rules []*Rule, f ipt.Family) []string {
		var out []string
		for _, x := range rules {
			if x.Family == 0 || x.Family == f {
				out = append(out, x.body())
			}
		}
		return out
	}
	for i := 0; i < 500; i++ {
		a, b := gen(ipt.IPv4), gen(ipt.IPv6)
		m := merge(a, b)
		if diff := cmp.Diff(project(a, ipt.IPv4), project(m, ipt.IPv4)); diff != "" {
			t.Fatalf("ipv4 order broken (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(project(b, ipt.IPv6), project(m, ipt.IPv6)); diff != "" {
			t.Fatalf("ipv6 order broken (-want +got):\n%s", diff)
		}
		for _, x := range m {
			if x.Family == 0 && x.familySpecific() {
				t.Fatalf("family-specific rule %q shared", x.body())
			}
		}
		// Every shared rule stands for one rule of each family.
		shared := 0
		for _, x := range m {
			if x.Family == 0 {
				shared++
			}
		}
		if want := len(a) + len(b) - len(m); shared != want {
			t.Fatalf("%d shared rules but %d + %d -> %d", shared, len(a), len(b), len(m))
		}
	}
}

// TestMergeHeadsAsIstioInserts checks that the leading rules of both
// families land where Istio's inserts at the same index put them.
func TestMergeHeadsAsIstioInserts(t *testing.T) {
	rule := func(f ipt.Family, name string, ts ...term) *Rule {
		return &Rule{Family: f, Purpose: name, terms: append(ts, verdictTerm{kind: ipt.Return})}
	}
	mark := markTerm{value: 1}
	p4 := addrTerm{src: true, prefix: netip.MustParsePrefix("127.0.0.6/32")}
	p6 := addrTerm{src: true, prefix: netip.MustParsePrefix("::6/128")}
	notMark := markTerm{value: 2, not: true}
	tail := ifnameTerm{name: "eth0"}
	a := []*Rule{rule(ipt.IPv4, "M", mark), rule(ipt.IPv4, "P4", p4), rule(ipt.IPv4, "N", notMark), rule(ipt.IPv4, "T", tail)}
	b := []*Rule{rule(ipt.IPv6, "M", mark), rule(ipt.IPv6, "P6", p6), rule(ipt.IPv6, "N", notMark), rule(ipt.IPv6, "T", tail)}
	var got []string
	for _, r := range mergeHeads(a, b, 3, 3) {
		got = append(got, r.Purpose)
	}
	if want := []string{"M", "P6", "N", "P4", "T"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Head lists of different lengths are merged as any other rules.
	got = nil
	for _, r := range mergeHeads(a, b[1:], 3, 2) {
		got = append(got, r.Purpose)
	}
	if want := []string{"M", "P4", "P6", "N", "T"}; !slices.Equal(got, want) {
		t.Errorf("unaligned: got %v, want %v", got, want)
	}
}

// TestFingerprint: a rule's fingerprint names its table, chain, place and
// text, so a rule moved, changed or put in another chain reads as not ours,
// and the same rule at the same place reads the same in every run.
func TestFingerprint(t *testing.T) {
	p, err := Translate([]*ipt.Ruleset{{Family: ipt.IPv4, Rules: []ipt.Rule{
		{Table: ipt.NAT, Chain: "OUTPUT", Match: ipt.Match{Proto: "tcp"}, Target: ret},
		{Table: ipt.NAT, Chain: "OUTPUT", Match: ipt.Match{Proto: "udp"}, Target: ret}}}})
	if err != nil {
		t.Fatal(err)
	}
	var rules []*Rule
	for _, c := range p.Tables[0].Chains {
		rules = append(rules, c.Rules...)
	}
	if len(rules) != 2 {
		t.Fatalf("%d rules, want 2", len(rules))
	}
	a, b := rules[0], rules[1]
	seen := map[[16]byte]string{}
	for name, fp := range map[string][16]byte{
		"a":               a.fingerprint("t", "c", 0),
		"b":               b.fingerprint("t", "c", 0),
		"a at 1":          a.fingerprint("t", "c", 1),
		"a in chain d":    a.fingerprint("t", "d", 0),
		"a in table u":    a.fingerprint("u", "c", 0),
		"a, name shifted": a.fingerprint("t\x00c", "", 0),
	} {
		if other, ok := seen[fp]; ok {
			t.Errorf("%s and %s share a fingerprint", name, other)
		}
		seen[fp] = name
	}
	if a.fingerprint("t", "c", 0) != a.fingerprint("t", "c", 0) {
		t.Error("the same rule at the same place has two fingerprints")
	}
	// Pinned: a build that fingerprints the same rule otherwise rewrites
	// every pod's rules an earlier build installed.
	if got := fmt.Sprintf("%x", a.fingerprint(TableNAT, "output", 12)); got != "ffccd302d83e869fdb7278ff547e21a8" {
		t.Errorf("fingerprint of %q at 12 in %s output: %s, as an earlier build made it: ffccd302d83e869fdb7278ff547e21a8", a.String(), TableNAT, got)
	}
}
