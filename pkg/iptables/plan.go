package iptables

import (
	"fmt"
	"slices"
	"strings"
)

// Ownership says which chains and rules of a namespace belong to the
// installer, so that a plan can replace or remove them and leave every other
// rule alone.
type Ownership struct {
	// Chains are the user-defined chain names the installer owns, in any table.
	Chains []string
	// OwnsRule reports whether a rule in a built-in chain was installed by us.
	// Rules that jump to an owned chain are always ours and need not be listed.
	OwnsRule func(table, chain, spec string) bool
}

func (o Ownership) ownsChain(c string) bool { return slices.Contains(o.Chains, c) }

func (o Ownership) ownsRule(table, chain, spec string) bool {
	if _, target, ok := strings.Cut(spec, "-j "); ok {
		name, _, _ := strings.Cut(target, " ")
		if o.ownsChain(name) {
			return true
		}
	}
	return o.OwnsRule != nil && o.OwnsRule(table, chain, spec)
}

// Plan returns the iptables-restore --noflush input that takes the family from
// cur to want in one transaction per table, or "" when cur already matches.
// Owned chains are declared (which creates or flushes them) and refilled,
// owned rules in built-in chains are deleted and re-added, and owned chains
// that want no longer has are deleted: rules not owned are never touched.
// An empty want plans the removal of everything owned.
func Plan(want *Ruleset, cur *State, own Ownership) string {
	return plan(want, cur, own, false)
}

// PlanRewrite is Plan without the up-to-date shortcut: every table that want
// uses, or that holds something owned, is rewritten (--force-apply).
func PlanRewrite(want *Ruleset, cur *State, own Ownership) string {
	return plan(want, cur, own, true)
}

func plan(want *Ruleset, cur *State, own Ownership, force bool) string {
	var b strings.Builder
	for _, table := range tables {
		planTable(&b, table, want, cur.Table(table), own, force)
	}
	return b.String()
}

func planTable(b *strings.Builder, table string, want *Ruleset, cur *TableState, own Ownership, force bool) {
	var wantChains []string
	for _, c := range want.Chains {
		if c.Table == table {
			wantChains = append(wantChains, c.Chain)
		}
	}
	var haveChains, stale []string
	for _, c := range cur.Chains {
		if own.ownsChain(c) {
			haveChains = append(haveChains, c)
			if !slices.Contains(wantChains, c) {
				stale = append(stale, c)
			}
		}
	}
	// Our rules in built-in chains, as they are and as they should be.
	haveBuiltin := map[string][]string{}
	for _, c := range cur.Chains {
		if !IsBuiltin(table, c) {
			continue
		}
		for _, spec := range cur.Rules[c] {
			if own.ownsRule(table, c, spec) {
				haveBuiltin[c] = append(haveBuiltin[c], spec)
			}
		}
	}
	wantRules := map[string][]string{}
	var heads, tails []Rule
	for _, r := range want.Rules {
		if r.Table != table {
			continue
		}
		wantRules[r.Chain] = append(wantRules[r.Chain], r.Spec())
		if IsBuiltin(table, r.Chain) {
			if r.Head {
				heads = append(heads, r)
			} else {
				tails = append(tails, r)
			}
		}
	}
	if force && len(wantChains)+len(haveChains)+len(wantRules)+len(haveBuiltin) == 0 {
		return
	}
	if !force && upToDate(table, wantChains, haveChains, wantRules, haveBuiltin, cur) {
		return
	}

	fmt.Fprintf(b, "*%s\n", table)
	for _, c := range wantChains {
		fmt.Fprintf(b, ":%s - [0:0]\n", c)
	}
	for _, c := range stale {
		fmt.Fprintf(b, ":%s - [0:0]\n", c)
	}
	for _, c := range sortedKeys(haveBuiltin) {
		for _, spec := range haveBuiltin[c] {
			fmt.Fprintf(b, "-D %s %s\n", c, spec)
		}
	}
	headPos := map[string]int{}
	for _, r := range heads {
		headPos[r.Chain]++
		writePurpose(b, r)
		fmt.Fprintf(b, "-I %s %d %s\n", r.Chain, headPos[r.Chain], r.Spec())
	}
	for _, r := range tails {
		writePurpose(b, r)
		fmt.Fprintf(b, "%s\n", r)
	}
	for _, r := range want.Rules {
		if r.Table == table && !IsBuiltin(table, r.Chain) {
			writePurpose(b, r)
			fmt.Fprintf(b, "%s\n", r)
		}
	}
	for _, c := range stale {
		fmt.Fprintf(b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
}

func writePurpose(b *strings.Builder, r Rule) {
	if r.Purpose != "" {
		fmt.Fprintf(b, "# %s\n", r.Purpose)
	}
}

func upToDate(table string, wantChains, haveChains []string, want, haveBuiltin map[string][]string, cur *TableState) bool {
	if !sameSet(wantChains, haveChains) {
		return false
	}
	for _, c := range wantChains {
		if !slices.Equal(want[c], cur.Rules[c]) {
			return false
		}
	}
	for _, c := range builtinChains[table] {
		if !slices.Equal(want[c], haveBuiltin[c]) {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Drift lists, for a report, what differs between cur and want: owned rules
// missing or extra, per table and chain. It is empty exactly when Plan is.
func Drift(want *Ruleset, cur *State, own Ownership) []string {
	var out []string
	for _, table := range tables {
		t := cur.Table(table)
		wantRules := map[string][]string{}
		var chains []string
		for _, c := range want.Chains {
			if c.Table == table {
				chains = append(chains, c.Chain)
				if !t.HasChain(c.Chain) {
					out = append(out, fmt.Sprintf("%s: chain %s missing", table, c.Chain))
				}
			}
		}
		for _, c := range t.Chains {
			if own.ownsChain(c) && !slices.Contains(chains, c) {
				out = append(out, fmt.Sprintf("%s: stale chain %s", table, c))
			}
		}
		for _, r := range want.Rules {
			if r.Table == table {
				wantRules[r.Chain] = append(wantRules[r.Chain], r.Spec())
			}
		}
		for _, c := range builtinChains[table] {
			if _, ok := wantRules[c]; !ok {
				wantRules[c] = nil
			}
		}
		for _, c := range sortedKeys(wantRules) {
			have := t.Rules[c]
			if IsBuiltin(table, c) {
				have = slices.DeleteFunc(slices.Clone(have), func(s string) bool { return !own.ownsRule(table, c, s) })
			}
			before := len(out)
			for _, s := range wantRules[c] {
				if !slices.Contains(have, s) {
					out = append(out, fmt.Sprintf("%s: missing -A %s %s", table, c, s))
				}
			}
			for _, s := range have {
				if !slices.Contains(wantRules[c], s) {
					out = append(out, fmt.Sprintf("%s: unexpected -A %s %s", table, c, s))
				}
			}
			if len(out) == before && !slices.Equal(have, wantRules[c]) {
				out = append(out, fmt.Sprintf("%s: rules of %s out of order or repeated", table, c))
			}
		}
	}
	return out
}
