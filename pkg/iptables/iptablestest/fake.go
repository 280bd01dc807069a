// Package iptablestest provides a recording iptables.Runner for unit tests.
package iptablestest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/iptables"
)

// Fake is a Runner that keeps each family's rules in memory, as
// iptables-save prints them, and records every call. Restore applies the
// --noflush transaction to them, all or nothing, the way iptables-restore
// does, so a later Save shows its effect.
type Fake struct {
	mu sync.Mutex
	// Saved is what Save returns per family; Restore rewrites it.
	Saved map[iptables.Family]string
	// Saves records the family of each Save call, in order.
	Saves []iptables.Family
	// Restored records each Restore call's text, in order.
	Restored []Call
}

// Call is one recorded Restore.
type Call struct {
	Family iptables.Family
	Text   string
}

var _ iptables.Runner = (*Fake)(nil)

// Save returns the family's rules.
func (f *Fake) Save(_ context.Context, fam iptables.Family) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Saves = append(f.Saves, fam)
	return f.Saved[fam], nil
}

// Restore records the transaction and applies it to the family's rules.
// A transaction iptables-restore would refuse changes nothing and fails.
func (f *Fake) Restore(_ context.Context, fam iptables.Family, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restored = append(f.Restored, Call{fam, text})
	st, err := iptables.ParseSave(f.Saved[fam])
	if err != nil {
		return fmt.Errorf("iptablestest: saved %s rules: %w", fam, err)
	}
	if err := restore(st, text); err != nil {
		return fmt.Errorf("iptablestest: %s restore: %w", fam, err)
	}
	if f.Saved == nil {
		f.Saved = map[iptables.Family]string{}
	}
	f.Saved[fam] = render(st)
	return nil
}

// restore applies an iptables-restore --noflush transaction to st.
func restore(st *iptables.State, text string) error {
	var name string
	var t *iptables.TableState
	need := func(chain string) error {
		if !t.HasChain(chain) {
			if !iptables.IsBuiltin(name, chain) {
				return fmt.Errorf("no chain %s in table %s", chain, name)
			}
			t.Chains = append(t.Chains, chain)
		}
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		verb, rest, _ := strings.Cut(line, " ")
		var err error
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name, t = line[1:], st.Table(line[1:])
			st.Tables[name] = t
		case t == nil:
			err = fmt.Errorf("%q outside a table", line)
		case line == "COMMIT":
			t = nil
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line[1:], " ")
			if !t.HasChain(chain) {
				t.Chains = append(t.Chains, chain)
			}
			t.Rules[chain] = nil // declaring a chain flushes it
		case verb == "-A":
			chain, spec, _ := strings.Cut(rest, " ")
			if err = need(chain); err == nil {
				t.Rules[chain] = append(t.Rules[chain], spec)
			}
		case verb == "-I":
			chain, rest, _ := strings.Cut(rest, " ")
			pos, spec, _ := strings.Cut(rest, " ")
			n, perr := strconv.Atoi(pos)
			if err = need(chain); err == nil && (perr != nil || n < 1 || n > len(t.Rules[chain])+1) {
				err = fmt.Errorf("bad position %q in chain %s", pos, chain)
			}
			if err == nil {
				t.Rules[chain] = slices.Insert(t.Rules[chain], n-1, spec)
			}
		case verb == "-D":
			chain, spec, _ := strings.Cut(rest, " ")
			if j := slices.Index(t.Rules[chain], spec); j >= 0 {
				t.Rules[chain] = slices.Delete(t.Rules[chain], j, j+1)
			} else {
				err = fmt.Errorf("no rule %q in chain %s", spec, chain)
			}
		case verb == "-X":
			if len(t.Rules[rest]) > 0 || iptables.IsBuiltin(name, rest) || !t.HasChain(rest) {
				err = fmt.Errorf("cannot delete chain %s", rest)
			} else {
				t.Chains = slices.DeleteFunc(t.Chains, func(c string) bool { return c == rest })
				delete(t.Rules, rest)
			}
		default:
			err = fmt.Errorf("unexpected %q", line)
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	if t != nil {
		return fmt.Errorf("table %s not committed", name)
	}
	return nil
}

// render prints st the way iptables-save does, tables in canonical order.
func render(st *iptables.State) string {
	var b strings.Builder
	names := iptables.Tables()
	for name := range st.Tables {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		t, ok := st.Tables[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", name)
		for _, c := range t.Chains {
			policy := "-"
			if iptables.IsBuiltin(name, c) {
				policy = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
		}
		for _, c := range t.Chains {
			for _, spec := range t.Rules[c] {
				fmt.Fprintf(&b, "-A %s %s\n", c, spec)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
