package iptables

import (
	"fmt"
	"strings"
)

// State is what iptables-save printed for one family: per table, its chains
// and each chain's rules as canonical specs.
type State struct {
	Tables map[string]*TableState
}

// TableState is one table of a State.
type TableState struct {
	Chains []string            // in the order saved, built-in chains first
	Rules  map[string][]string // chain -> rule specs, in order
}

// Table returns the named table, or an empty one if it was not saved.
func (s *State) Table(name string) *TableState {
	if s != nil && s.Tables[name] != nil {
		return s.Tables[name]
	}
	return &TableState{Rules: map[string][]string{}}
}

// HasChain reports whether the table holds the chain.
func (t *TableState) HasChain(chain string) bool {
	for _, c := range t.Chains {
		if c == chain {
			return true
		}
	}
	return false
}

// RuleCount is the number of rules in all tables.
func (s *State) RuleCount() int {
	n := 0
	for _, t := range s.Tables {
		for _, r := range t.Rules {
			n += len(r)
		}
	}
	return n
}

// ParseSave parses the output of iptables-save. It accepts only the
// line forms iptables-save prints and reports the first line it cannot read.
func ParseSave(text string) (*State, error) {
	st := &State{Tables: map[string]*TableState{}}
	var cur *TableState
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		n := i + 1
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			if cur != nil {
				return nil, fmt.Errorf("line %d: table %q opened before COMMIT", n, line[1:])
			}
			name := line[1:]
			if name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("line %d: bad table name %q", n, name)
			}
			cur = st.Tables[name]
			if cur == nil {
				cur = &TableState{Rules: map[string][]string{}}
				st.Tables[name] = cur
			}
		case line == "COMMIT":
			if cur == nil {
				return nil, fmt.Errorf("line %d: COMMIT outside a table", n)
			}
			cur = nil
		case strings.HasPrefix(line, ":"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: chain outside a table", n)
			}
			name, _, _ := strings.Cut(line[1:], " ")
			if name == "" {
				return nil, fmt.Errorf("line %d: empty chain name", n)
			}
			if !cur.HasChain(name) {
				cur.Chains = append(cur.Chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			if cur == nil {
				return nil, fmt.Errorf("line %d: rule outside a table", n)
			}
			chain, spec, _ := strings.Cut(line[3:], " ")
			if !cur.HasChain(chain) {
				return nil, fmt.Errorf("line %d: rule in undeclared chain %q", n, chain)
			}
			cur.Rules[chain] = append(cur.Rules[chain], spec)
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n, line)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("table not committed")
	}
	return st, nil
}
