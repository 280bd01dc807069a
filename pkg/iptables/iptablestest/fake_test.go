package iptablestest

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/iptables"
)

var own = iptables.Ownership{Chains: []string{"T_OUT"}}

func ruleset(dst string) *iptables.Ruleset {
	return &iptables.Ruleset{
		Family: iptables.IPv4,
		Chains: []iptables.ChainRef{{Table: iptables.NAT, Chain: "T_OUT"}},
		Rules: []iptables.Rule{
			{Table: iptables.NAT, Chain: "OUTPUT", Target: iptables.JumpTo("T_OUT")},
			{Table: iptables.NAT, Chain: "T_OUT", Match: iptables.Match{Dst: iptables.Addr{Prefix: netip.MustParsePrefix(dst)}}, Target: iptables.Target{Kind: iptables.Redirect, Port: 15001}},
		},
	}
}

func state(t *testing.T, f *Fake) *iptables.State {
	t.Helper()
	text, err := f.Save(context.Background(), iptables.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	st, err := iptables.ParseSave(text)
	if err != nil {
		t.Fatalf("%v:\n%s", err, text)
	}
	return st
}

// TestFakeConverges: what Plan writes, the fake applies, so the next plan
// is empty, a changed ruleset is one transaction, and removal leaves no
// chain and keeps a foreign rule.
func TestFakeConverges(t *testing.T) {
	ctx := context.Background()
	f := &Fake{Saved: map[iptables.Family]string{iptables.IPv4: "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -d 192.0.2.1/32 -j ACCEPT\nCOMMIT\n"}}
	for _, want := range []*iptables.Ruleset{ruleset("10.0.0.0/8"), ruleset("10.0.0.0/8"), ruleset("172.16.0.0/12"), {Family: iptables.IPv4}} {
		if text := iptables.Plan(want, state(t, f), own); text != "" {
			if err := f.Restore(ctx, iptables.IPv4, text); err != nil {
				t.Fatal(err)
			}
		}
		if d := iptables.Drift(want, state(t, f), own); len(d) > 0 {
			t.Errorf("after restore:\n%s", strings.Join(d, "\n"))
		}
	}
	if len(f.Restored) != 3 {
		t.Errorf("%d transactions, want 3 (the repeat is a no-op)", len(f.Restored))
	}
	nat := state(t, f).Table(iptables.NAT)
	if nat.HasChain("T_OUT") || len(nat.Rules["OUTPUT"]) != 1 {
		t.Errorf("after removal: chains %q, OUTPUT %q", nat.Chains, nat.Rules["OUTPUT"])
	}
}

// TestFakeRefuses: a transaction iptables-restore would refuse fails and changes nothing.
func TestFakeRefuses(t *testing.T) {
	f := &Fake{}
	for _, text := range []string{"-A OUTPUT -j ACCEPT\n", "*nat\n-A T_OUT -j RETURN\nCOMMIT\n", "*nat\n-D OUTPUT -j RETURN\nCOMMIT\n", "*nat\n:T_OUT - [0:0]\n"} {
		if err := f.Restore(context.Background(), iptables.IPv4, text); err == nil {
			t.Errorf("%q applied", text)
		}
	}
	if f.Saved[iptables.IPv4] != "" {
		t.Errorf("refused transactions changed the rules:\n%s", f.Saved[iptables.IPv4])
	}
}
