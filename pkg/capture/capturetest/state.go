// Package capturetest reads what traffic capture leaves in a network
// namespace, normalised so that two namespaces, one set up by Skiff and one
// by Istio's own binaries, compare as text: the tests that hold Skiff's
// rules to Istio's (test/interop, pkg/cni) share it.
package capturetest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

var (
	saveComment = regexp.MustCompile(`(?m)^#.*\n`)
	counters    = regexp.MustCompile(` ?\[\d+:\d+\]`)
	ruleComment = regexp.MustCompile(` -m comment --comment ("[^"]*"|\S+)`)
	nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+ ?| comment "[^"]*"`)
)

// nfprotoGuard is the family guard Skiff's native rules carry with IPv6
// off: the documented difference "IPv6 off leaves IPv6 alone" of
// docs/istio-iptables.md (Istio's rules catch IPv6 too).
var nfprotoGuard = regexp.MustCompile(`(?m)^(\t\t)meta nfproto ipv4 `)

// WithoutIPv4Guard returns nft's listing without that guard, and whether
// it had any.
func WithoutIPv4Guard(listing string) (string, bool) {
	out := nfprotoGuard.ReplaceAllString(listing, "$1")
	return out, out != listing
}

// Saves are the iptables-save commands of both backends and families.
var Saves = []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"}

// State is everything capture may change in a namespace, normalised.
type State struct {
	// Tables maps a save command and a table name to the table's lines
	// (no counters, comments or timestamps) in iptables-save's order.
	Tables map[string]map[string]string
	// Rest is policy routing, routes, loopback addresses and the
	// istio-proxy-* tables of native nftables (without counters).
	Rest string
}

// Read reads the state of ns.
func Read(t testing.TB, ns *netnstest.NS) State {
	t.Helper()
	s := State{Tables: map[string]map[string]string{}}
	for _, save := range Saves {
		out := ns.Exec(t, save)
		out = saveComment.ReplaceAllString(out, "")
		out = counters.ReplaceAllString(out, "")
		out = ruleComment.ReplaceAllString(out, "")
		s.Tables[save] = map[string]string{}
		var name string
		for _, line := range strings.SplitAfter(out, "\n") {
			if n, ok := strings.CutPrefix(line, "*"); ok {
				name = strings.TrimSpace(n)
				continue
			}
			if line != "" && name != "" {
				s.Tables[save][name] += line
			}
		}
	}
	var b strings.Builder
	for _, args := range [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "addr", "show", "dev", "lo"},
	} {
		fmt.Fprintf(&b, "== ip %s\n%s", strings.Join(args, " "), ns.Exec(t, "ip", args...))
	}
	for _, line := range strings.Split(ns.Exec(t, "nft", "list", "tables"), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "istio-proxy-") {
			out := nftCounters.ReplaceAllString(ns.Exec(t, "nft", "list", "table", f[1], f[2]), "")
			fmt.Fprintf(&b, "== nft list table %s %s\n%s", f[1], f[2], out)
		}
	}
	s.Rest = b.String()
	return s
}

// String renders s with the tables of each save in name order (the order
// iptables-legacy-save prints them in is the order they were created).
func (s State) String() string {
	var b strings.Builder
	for _, save := range Saves {
		fmt.Fprintf(&b, "== %s\n", save)
		for _, name := range slices.Sorted(maps.Keys(s.Tables[save])) {
			fmt.Fprintf(&b, "*%s\n%s", name, s.Tables[save][name])
		}
	}
	return b.String() + s.Rest
}

// Replace writes every old in s's routing and nftables text as new (a
// pod's own address, say, so that two pods compare).
func (s *State) Replace(old, new string) { s.Rest = strings.ReplaceAll(s.Rest, old, new) }

// emptyTable reports whether a table's lines declare chains and nothing else.
func emptyTable(body string) bool {
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(line, ":") && line != "COMMIT" {
			return false
		}
	}
	return true
}

// DropProbeArtefacts removes from Istio's state the empty tables (no rule,
// no chain of ours) that Skiff's state does not have: Istio's backend
// detection lists tables with iptables commands, which create them in
// every backend and family it asks, whatever it then programs. That is a
// documented behaviour difference (docs/istio-iptables.md, "Backend
// detection has no side effects"); each is logged rather than compared.
func DropProbeArtefacts(t testing.TB, istio, skiff State) {
	t.Helper()
	for _, save := range Saves {
		for name, body := range istio.Tables[save] {
			if _, ok := skiff.Tables[save][name]; !ok && emptyTable(body) {
				t.Logf("Istio left an empty %s table in %s; Skiff does not", name, save)
				delete(istio.Tables[save], name)
			}
		}
	}
}

// Compare fails t unless Skiff's state is Istio's, or, when differs names a
// documented deliberate difference, unless they differ (then the
// difference is logged).
func Compare(t testing.TB, istio, skiff State, differs string) {
	t.Helper()
	diff := cmp.Diff(istio.String(), skiff.String())
	switch {
	case differs == "" && diff != "":
		t.Errorf("kernel state differs from Istio's (-istio +skiff):\n%s", diff)
	case differs != "" && diff == "":
		t.Errorf("documented difference %q is gone: kernel state is Istio's", differs)
	case differs != "":
		t.Logf("deliberate difference (%s) (-istio +skiff):\n%s", differs, diff)
	}
}
