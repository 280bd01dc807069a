package iptables

import (
	"fmt"
	"net/netip"
)

// Family is an IP protocol family: IPv4 rules go to iptables, IPv6 rules to ip6tables.
type Family uint8

// The two families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// Table names.
const (
	Raw    = "raw"
	Mangle = "mangle"
	NAT    = "nat"
	Filter = "filter"
)

// tables lists the tables in the order they are rendered and read.
var tables = [...]string{Raw, Mangle, NAT, Filter}

// Tables returns the tables in the order they are rendered and read.
func Tables() []string { return append([]string(nil), tables[:]...) }

// builtinChains holds the kernel's chains of each table.
var builtinChains = map[string][]string{
	Raw:    {"PREROUTING", "OUTPUT"},
	Mangle: {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	NAT:    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	Filter: {"INPUT", "FORWARD", "OUTPUT"},
}

// IsBuiltin reports whether chain is one of the kernel's chains of table.
func IsBuiltin(table, chain string) bool {
	for _, c := range builtinChains[table] {
		if c == chain {
			return true
		}
	}
	return false
}

// Rule is one netfilter rule: where it lives, what it matches, what it does, and why.
type Rule struct {
	Table  string
	Chain  string
	Match  Match
	Target Target
	// Purpose says why the rule exists. It is shown by dry runs and logs but
	// never sent to the kernel, so the kernel rules stay identical to Istio's.
	Purpose string
	// Head marks a rule that belongs at the head of a built-in chain (Istio
	// inserts it with -I CHAIN 1) rather than appended after existing rules.
	Head bool
}

// Addr matches a source or destination prefix, or its negation.
type Addr struct {
	Prefix netip.Prefix
	Not    bool
}

// IsSet reports whether the address match is present.
func (a Addr) IsSet() bool { return a.Prefix.IsValid() }

// PortRange is an inclusive port range; a single port has Lo == Hi.
type PortRange struct{ Lo, Hi uint16 }

// Port returns the range holding just p.
func Port(p uint16) PortRange { return PortRange{p, p} }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return fmt.Sprint(r.Lo)
	}
	return fmt.Sprintf("%d:%d", r.Lo, r.Hi)
}

// PortMatch matches a source or destination port range, or its negation.
type PortMatch struct {
	Range PortRange
	Not   bool
	set   bool
}

// Ports returns a match of one port range.
func Ports(r PortRange) PortMatch { return PortMatch{Range: r, set: true} }

// NotPorts returns a negated match of one port range.
func NotPorts(r PortRange) PortMatch { return PortMatch{Range: r, Not: true, set: true} }

// IsSet reports whether the port match is present.
func (p PortMatch) IsSet() bool { return p.set }

// Owner matches the uid or gid of the local socket that sent a packet.
type Owner struct {
	GID bool // --gid-owner instead of --uid-owner
	ID  uint32
	Not bool
}

// MarkMatch matches the packet mark (-m mark) or the connection mark (-m connmark).
type MarkMatch struct {
	Value uint32
	Not   bool
}

// Match is the conjunction of everything a rule matches on. The zero value matches all packets.
type Match struct {
	Src, Dst Addr
	In, Out  string // interface names (-i, -o)
	Proto    string // "tcp" or "udp"
	SPort    PortMatch
	DPort    PortMatch
	// MultiDPorts matches (or with NotMultiDPorts, excludes) a list of
	// destination ports with -m multiport.
	MultiDPorts    []PortRange
	NotMultiDPorts bool
	Owners         []Owner
	CTState        string // -m conntrack --ctstate
	Mark           *MarkMatch
	ConnMark       *MarkMatch
}

// TargetKind names what a rule does with a packet it matches.
type TargetKind uint8

// The targets Skiff uses.
const (
	Jump            TargetKind = iota + 1 // to Target.Chain
	Return                                // RETURN
	Accept                                // ACCEPT
	Drop                                  // DROP
	Redirect                              // REDIRECT --to-ports Target.Port
	TProxy                                // TPROXY --on-port Target.Port --tproxy-mark Target.Mark
	SetMark                               // MARK --set-mark Target.Mark
	SaveConnMark                          // CONNMARK --save-mark
	RestoreConnMark                       // CONNMARK --restore-mark
	CTZone                                // CT --zone Target.Zone
)

// Target is what a rule does.
type Target struct {
	Kind  TargetKind
	Chain string // Jump
	Port  uint16 // Redirect, TProxy
	// OnIP is the address TPROXY delivers to: 0.0.0.0 (the default) or ::.
	OnIP netip.Addr
	Mark uint32 // TProxy, SetMark
	Zone uint16 // CTZone
}

// JumpTo returns a jump to chain.
func JumpTo(chain string) Target { return Target{Kind: Jump, Chain: chain} }

// ChainRef names a user-defined chain in a table.
type ChainRef struct{ Table, Chain string }

// Ruleset is everything Skiff installs for one family: the user-defined chains
// it owns and the rules, each chain's rules in their final order.
type Ruleset struct {
	Family Family
	Chains []ChainRef
	Rules  []Rule
}

// Empty reports whether the ruleset installs nothing.
func (rs *Ruleset) Empty() bool { return len(rs.Chains) == 0 && len(rs.Rules) == 0 }

// ChainRules returns the rules of one chain, in order.
func (rs *Ruleset) ChainRules(table, chain string) []Rule {
	var out []Rule
	for _, r := range rs.Rules {
		if r.Table == table && r.Chain == chain {
			out = append(out, r)
		}
	}
	return out
}
