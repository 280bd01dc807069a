package nftables

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// The tables Skiff owns, one per iptables table, named as Istio names them.
const (
	TableNAT    = "istio-proxy-nat"
	TableMangle = "istio-proxy-mangle"
	TableRaw    = "istio-proxy-raw"
)

// tableSpecs maps each supported iptables table to its nftables table, in
// the order the tables are created and listed (Istio's order).
var tableSpecs = []struct {
	iptables, name string
}{
	{ipt.NAT, TableNAT},
	{ipt.Mangle, TableMangle},
	{ipt.Raw, TableRaw},
}

// OwnedTables returns the names of the inet tables Skiff owns. Apply and
// Cleanup delete tables of these names and never touch any other.
func OwnedTables() []string {
	out := make([]string, len(tableSpecs))
	for i, s := range tableSpecs {
		out[i] = s.name
	}
	return out
}

// Program is the nftables form of Skiff's rules: the inet tables to
// install, each complete.
type Program struct {
	Tables []*Table
}

// Table is one inet table: its chains, base chains first.
type Table struct {
	Name   string
	Chains []*Chain
}

// Chain is a base chain (Base set) or a regular chain, with its rules in order.
type Chain struct {
	Name  string
	Base  *BaseChain
	Rules []*Rule
}

// BaseChain says where a base chain hooks into the stack. Its policy is accept.
type BaseChain struct {
	Type     string // "filter", "nat" or "route"
	Hook     string // "prerouting", "input", "forward", "output" or "postrouting"
	Priority int32
}

// Rule is one nftables rule.
type Rule struct {
	// Family is the only family the rule applies to, or 0 when it applies
	// to both (an IPv4 and an IPv6 rule that were identical, installed once).
	Family ipt.Family
	// Purpose says why the rule exists; it comes from the typed model and
	// is shown by dry runs, never sent to the kernel.
	Purpose string
	terms   []term
	head    bool // placed at the head of its chain
}

// Table returns the table of that name, or nil.
func (p *Program) Table(name string) *Table {
	for _, t := range p.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// RuleCount returns the number of rules in all tables.
func (p *Program) RuleCount() int {
	n := 0
	for _, t := range p.Tables {
		for _, c := range t.Chains {
			n += len(c.Rules)
		}
	}
	return n
}

// hasAddr reports whether the rule matches an address, which makes the
// family guard implicit.
func (r *Rule) hasAddr() bool {
	for _, t := range r.terms {
		if _, ok := t.(addrTerm); ok {
			return true
		}
	}
	return false
}

// explicitGuard reports whether the rule needs a "meta nfproto" match of
// its own: it applies to one family but matches no address of it.
func (r *Rule) explicitGuard() bool { return r.Family != 0 && !r.hasAddr() }

// String renders the rule as nft lists it.
func (r *Rule) String() string {
	parts := make([]string, 0, len(r.terms)+1)
	if r.explicitGuard() {
		parts = append(parts, nfprotoTerm{v6: r.Family == ipt.IPv6}.text())
	}
	for _, t := range r.terms {
		parts = append(parts, t.text())
	}
	return strings.Join(parts, " ")
}

// body is the rule without its family guard: two rules with the same body
// and no family-specific term are the same rule in both families.
func (r *Rule) body() string {
	parts := make([]string, len(r.terms))
	for i, t := range r.terms {
		parts[i] = t.text()
	}
	return strings.Join(parts, " ")
}

// familySpecific reports whether the rule can only apply to one family: it
// matches an address or hands packets to TPROXY.
func (r *Rule) familySpecific() bool {
	for _, t := range r.terms {
		switch t.(type) {
		case addrTerm, tproxyStmt:
			return true
		}
	}
	return false
}

// fingerprintVersion changes whenever the translation of a rule into
// netlink expressions changes, so that rules installed by an older build
// are rewritten.
const fingerprintVersion = "skiff-nft/3"

// fingerprint identifies the rule at its place: table, chain, position and
// text. Apply stores it in the rule's user data and compares it on
// read-back. It is FNV-1a's 128 bits, not a cryptographic hash: it tells
// our own rules apart, and anyone who could forge one in a pod's namespace
// could rewrite its rules anyway. (SHA-256 linked the FIPS module's
// packages into the CNI plugin, a process started for every pod.)
func (r *Rule) fingerprint(table, chain string, index int) [16]byte {
	var buf [256]byte
	b := append(buf[:0], fingerprintVersion...)
	b = append(append(append(b, 0), table...), 0)
	b = append(append(b, chain...), 0)
	b = append(strconv.AppendInt(b, int64(index), 10), 0)
	b = append(b, r.String()...)
	h := fnv.New128a()
	h.Write(b)
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// Translate turns the rulesets Build returns (at most one per family) into
// a Program laid out as Istio 1.31's native mode lays out the same rules.
// Rules identical in both families are installed once; the others are one
// family's through their addresses, and, when only one family is
// programmed, through a "meta nfproto" guard. It rejects any table, chain,
// match or target the nftables layout cannot express, naming the rule.
func Translate(sets []*ipt.Ruleset) (*Program, error) {
	byFamily := map[ipt.Family]*ipt.Ruleset{}
	for _, rs := range sets {
		if rs == nil {
			continue
		}
		if rs.Family != ipt.IPv4 && rs.Family != ipt.IPv6 {
			return nil, fmt.Errorf("ruleset of unknown family %d", rs.Family)
		}
		if byFamily[rs.Family] != nil {
			return nil, fmt.Errorf("two %s rulesets", rs.Family)
		}
		byFamily[rs.Family] = rs
	}
	// Every table and chain a ruleset names must be one we can express.
	for _, rs := range byFamily {
		for _, c := range rs.Chains {
			if spec(c.Table) == "" {
				return nil, fmt.Errorf("%s chain %s: table %q has no istio-proxy nftables table", rs.Family, c.Chain, c.Table)
			}
			if ipt.IsBuiltin(c.Table, c.Chain) {
				return nil, fmt.Errorf("%s chain %s/%s: a built-in chain cannot be declared", rs.Family, c.Table, c.Chain)
			}
		}
		for _, r := range rs.Rules {
			if spec(r.Table) == "" {
				return nil, fmt.Errorf("%s rule %q: table %q has no istio-proxy nftables table", rs.Family, ruleText(r), r.Table)
			}
			if !ipt.IsBuiltin(r.Table, r.Chain) && !slices.Contains(rs.Chains, ipt.ChainRef{Table: r.Table, Chain: r.Chain}) {
				return nil, fmt.Errorf("%s rule %q: chain %s/%s is not declared", rs.Family, ruleText(r), r.Table, r.Chain)
			}
		}
	}

	p := &Program{}
	for _, s := range tableSpecs {
		t, err := translateTable(s.iptables, s.name, byFamily[ipt.IPv4], byFamily[ipt.IPv6])
		if err != nil {
			return nil, err
		}
		if t != nil {
			p.Tables = append(p.Tables, t)
		}
	}
	return p, nil
}

// chainOrder lists, per iptables table, Istio's chains in the order Istio
// creates them in its nftables tables (and nft lists them in).
var chainOrder = map[string][]string{
	ipt.NAT:    {"ISTIO_INBOUND", "ISTIO_REDIRECT", "ISTIO_IN_REDIRECT", "ISTIO_OUTPUT", "ISTIO_OUTPUT_DNS"},
	ipt.Mangle: {"ISTIO_DIVERT", "ISTIO_TPROXY", "ISTIO_INBOUND", "ISTIO_DROP"},
	ipt.Raw:    {"ISTIO_INBOUND", "ISTIO_OUTPUT_DNS"},
}

// istioChainOrder sorts the declared chains of a table into Istio's order;
// chains Istio does not have follow in declaration order.
func istioChainOrder(iptTable string, declared []string) []string {
	known := chainOrder[iptTable]
	out := make([]string, 0, len(declared))
	for _, c := range known {
		if slices.Contains(declared, c) {
			out = append(out, c)
		}
	}
	for _, c := range declared {
		if !slices.Contains(known, c) {
			out = append(out, c)
		}
	}
	return out
}

func spec(iptTable string) string {
	for _, s := range tableSpecs {
		if s.iptables == iptTable {
			return s.name
		}
	}
	return ""
}

// hooks lists the built-in chains in the order base chains are created.
var hooks = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// baseChain returns where the built-in chain of an iptables table hooks:
// the same hook, at the priority of the iptables table.
func baseChain(table, chain string) *BaseChain {
	hook := strings.ToLower(chain)
	switch table {
	case ipt.Raw:
		return &BaseChain{Type: "filter", Hook: hook, Priority: -300}
	case ipt.Mangle:
		if chain == "OUTPUT" {
			// iptables' mangle OUTPUT reroutes a packet whose mark it changed.
			return &BaseChain{Type: "route", Hook: hook, Priority: -150}
		}
		return &BaseChain{Type: "filter", Hook: hook, Priority: -150}
	default: // nat
		prio := int32(-100) // dstnat: PREROUTING and OUTPUT
		if chain == "INPUT" || chain == "POSTROUTING" {
			prio = 100 // srcnat
		}
		return &BaseChain{Type: "nat", Hook: hook, Priority: prio}
	}
}

// ChainName returns the nftables name of an iptables chain: built-in chains
// become their hook's name, Istio's chains lower case with dashes
// (ISTIO_OUTPUT_DNS becomes istio-output-dns).
func ChainName(chain string) string {
	return strings.ReplaceAll(strings.ToLower(chain), "_", "-")
}

func validChainName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func translateTable(iptTable, name string, v4, v6 *ipt.Ruleset) (*Table, error) {
	t := &Table{Name: name}
	var user []string // iptables names of our chains, in declaration order
	used := map[string]bool{}
	for _, rs := range []*ipt.Ruleset{v4, v6} {
		if rs == nil {
			continue
		}
		for _, c := range rs.Chains {
			if c.Table == iptTable && !slices.Contains(user, c.Chain) {
				user = append(user, c.Chain)
			}
		}
		for _, r := range rs.Rules {
			if r.Table == iptTable {
				used[r.Chain] = true
			}
		}
	}
	chains := map[string]string{} // nft name -> iptables name, to catch collisions
	jumpable := map[string]bool{}
	var order []string
	for _, c := range hooks {
		if used[c] {
			order = append(order, c)
		}
	}
	for _, c := range user {
		jumpable[c] = true
	}
	order = append(order, istioChainOrder(iptTable, user)...)
	if len(order) == 0 {
		return nil, nil
	}
	for _, c := range order {
		n := ChainName(c)
		if !validChainName(n) {
			return nil, fmt.Errorf("%s chain %s: %q is not a valid nftables chain name", iptTable, c, n)
		}
		if prev, ok := chains[n]; ok {
			return nil, fmt.Errorf("%s chains %s and %s would both be named %s", iptTable, prev, c, n)
		}
		chains[n] = c
	}
	for _, c := range order {
		ch := &Chain{Name: ChainName(c)}
		if ipt.IsBuiltin(iptTable, c) {
			ch.Base = baseChain(iptTable, c)
		}
		var fams [2][]*Rule
		var heads [2]int // rules at the head of the chain, leading each family's list
		for i, rs := range []*ipt.Ruleset{v4, v6} {
			if rs == nil {
				continue
			}
			for _, r := range rs.ChainRules(iptTable, c) {
				if r.Target.Kind == ipt.Jump && !jumpable[r.Target.Chain] {
					return nil, fmt.Errorf("%s rule %q: jump to %s, which is not a declared chain of table %s", rs.Family, ruleText(r), r.Target.Chain, iptTable)
				}
				nr, err := translateRule(r, rs.Family)
				if err != nil {
					return nil, fmt.Errorf("%s rule %s/%s %q: %w", rs.Family, iptTable, c, ruleText(r), err)
				}
				if r.Head && heads[i] == len(fams[i]) {
					heads[i] += len(nr)
					for _, x := range nr {
						x.head = true
					}
				}
				fams[i] = append(fams[i], nr...)
			}
		}
		if v4 == nil || v6 == nil {
			// One family: its rules as they are, which is what merging
			// with an empty list gives, without the work of it.
			ch.Rules = append(fams[0], fams[1]...)
		} else {
			ch.Rules = mergeHeads(fams[0], fams[1], heads[0], heads[1])
		}
		if v4 != nil && v6 != nil {
			// With both families programmed, a rule of one family that
			// matches no address applies to both, as Istio writes it once
			// for both. With one family, it keeps its guard: the other
			// family passes untouched, as with iptables.
			for _, r := range ch.Rules {
				if !r.hasAddr() {
					r.Family = 0
				}
			}
		}
		t.Chains = append(t.Chains, ch)
	}
	return t, nil
}

// merge interleaves the IPv4 and IPv6 rules of a chain into one list in
// which each family sees exactly its own rules in their order. The longest
// common subsequence of rules that are the same in both families (and not
// family-specific) is installed once, for both; every other rule keeps its
// family (a guard when it matches no address and only one family is
// programmed).
func merge(a, b []*Rule) []*Rule {
	same := func(x, y *Rule) bool {
		return !x.familySpecific() && !y.familySpecific() && x.body() == y.body()
	}
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if same(a[i], b[j]) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []*Rule
	var pendA, pendB []*Rule
	// Between two shared rules, each family's address rules go by steps,
	// as Istio writes them: the IPv4 rules of one purpose, then the IPv6
	// rules of that purpose, then the next purpose. A rule of one family
	// that matches no address (Istio writes it once, for both) keeps its
	// place before them. Rules at the head of the chain, which Istio
	// inserts one by one at the top, IPv4's first, list IPv6's first.
	flush := func() {
		if allHead(pendA) && allHead(pendB) {
			out = append(append(out, pendB...), pendA...)
			pendA, pendB = nil, nil
			return
		}
		i, j := 0, 0
		run := func(rs []*Rule, k int, shape string) int {
			for k < len(rs) && rs[k].familySpecific() && rs[k].shape() == shape {
				out = append(out, rs[k])
				k++
			}
			return k
		}
		for i < len(pendA) || j < len(pendB) {
			switch {
			case i < len(pendA) && !pendA[i].familySpecific():
				out = append(out, pendA[i])
				i++
			case j < len(pendB) && !pendB[j].familySpecific():
				out = append(out, pendB[j])
				j++
			case i < len(pendA):
				shape := pendA[i].shape()
				i = run(pendA, i, shape)
				j = run(pendB, j, shape)
			default:
				j = run(pendB, j, pendB[j].shape())
			}
		}
		pendA, pendB = nil, nil
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case same(a[i], b[j]) && lcs[i][j] == lcs[i+1][j+1]+1:
			flush()
			r := *a[i]
			r.Family = 0
			if b[j].Purpose != r.Purpose {
				r.Purpose += "; " + b[j].Purpose
			}
			out = append(out, &r)
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			pendA = append(pendA, a[i])
			i++
		default:
			pendB = append(pendB, b[j])
			j++
		}
	}
	pendA = append(pendA, a[i:]...)
	pendB = append(pendB, b[j:]...)
	flush()
	return out
}

// allHead reports whether every rule stands at the head of its chain.
func allHead(rs []*Rule) bool {
	for _, r := range rs {
		if !r.head {
			return false
		}
	}
	return true
}

// shape is the rule without its addresses, in its terms and its purpose:
// the rules of one family that differ only in those are one step.
func (r *Rule) shape() string {
	var parts []string
	for _, t := range r.terms {
		if _, ok := t.(addrTerm); !ok {
			parts = append(parts, t.text())
		}
	}
	return purposeShape(r.Purpose) + "\x00" + strings.Join(parts, " ")
}

// purposeShape is a rule's purpose without the addresses and prefixes in
// it: the rules of one family that differ only in those are one step.
func purposeShape(purpose string) string {
	words := strings.Fields(purpose)
	for i, w := range words {
		if _, err := netip.ParsePrefix(w); err == nil {
			words[i] = "*"
		} else if _, err := netip.ParseAddr(w); err == nil {
			words[i] = "*"
		}
	}
	return strings.Join(words, " ")
}

// mergeHeads merges the rules of both families like merge, placing the
// rules that lead each family's list (rules Build put at the head of the
// chain, each at its index) as Istio's inserts place them: when the k-th
// head rule of each family is the same rule, it is inserted once at k;
// otherwise the IPv4 rule is inserted at k and then the IPv6 rule, before
// it. This applies only when both families have as many head rules, the
// shared ones stand at the same index and all of them return (so their
// order changes nothing but the listing); otherwise merge decides.
func mergeHeads(a, b []*Rule, na, nb int) []*Rule {
	same := func(x, y *Rule) bool {
		return !x.familySpecific() && !y.familySpecific() && x.body() == y.body()
	}
	returns := func(r *Rule) bool {
		v, ok := r.terms[len(r.terms)-1].(verdictTerm)
		return ok && v.kind == ipt.Return
	}
	aligned := na > 0 && na == nb
	for k := 0; aligned && k < na; k++ {
		x, y := a[k], b[k]
		aligned = returns(x) && returns(y) && (same(x, y) || (x.familySpecific() && y.familySpecific()))
	}
	if !aligned {
		return merge(a, b)
	}
	out := merge(a[na:], b[nb:])
	for k := 0; k < na; k++ {
		if same(a[k], b[k]) {
			r := *a[k]
			r.Family = 0
			if b[k].Purpose != r.Purpose {
				r.Purpose += "; " + b[k].Purpose
			}
			out = slices.Insert(out, min(k, len(out)), &r)
			continue
		}
		out = slices.Insert(out, min(k, len(out)), a[k])
		out = slices.Insert(out, min(k, len(out)), b[k])
	}
	return out
}

// translateRule returns the nftables rules of one iptables rule: one, or
// for TPROXY two (see below).
func translateRule(r ipt.Rule, f ipt.Family) ([]*Rule, error) {
	m := r.Match
	var terms []term
	for _, ifc := range []struct {
		out  bool
		name string
	}{{false, m.In}, {true, m.Out}} {
		if ifc.name == "" {
			continue
		}
		if err := checkIfname(ifc.name); err != nil {
			return nil, err
		}
		terms = append(terms, ifnameTerm{out: ifc.out, name: ifc.name})
	}
	var addrs []term
	for _, a := range []struct {
		src  bool
		addr ipt.Addr
	}{{true, m.Src}, {false, m.Dst}} {
		if !a.addr.IsSet() {
			continue
		}
		p := a.addr.Prefix
		if p.Addr().Zone() != "" || p.Addr().Is4In6() || (p.Addr().Is6() != (f == ipt.IPv6)) {
			return nil, fmt.Errorf("address %s is not an %s prefix", p, f)
		}
		addrs = append(addrs, addrTerm{src: a.src, prefix: p.Masked(), not: a.addr.Not})
	}
	switch m.Proto {
	case "", "tcp", "udp":
	default:
		return nil, fmt.Errorf("unsupported protocol %q (want tcp or udp)", m.Proto)
	}
	var ports []portMatch
	for _, pm := range []struct {
		src bool
		m   ipt.PortMatch
	}{{true, m.SPort}, {false, m.DPort}} {
		if !pm.m.IsSet() {
			continue
		}
		if pm.m.Range.Lo > pm.m.Range.Hi {
			return nil, fmt.Errorf("port range %s is empty", pm.m.Range)
		}
		ports = append(ports, portMatch{src: pm.src, ranges: []ipt.PortRange{pm.m.Range}, not: pm.m.Not})
	}
	if len(m.MultiDPorts) > 0 {
		ranges, err := normalizePorts(m.MultiDPorts)
		if err != nil {
			return nil, err
		}
		ports = append(ports, portMatch{ranges: ranges, not: m.NotMultiDPorts})
	} else if m.NotMultiDPorts {
		return nil, errors.New("negated multiport match without ports")
	}
	if len(ports) > 0 && m.Proto == "" {
		return nil, errors.New("port match without a protocol (-p tcp or -p udp)")
	}
	// The order of the matches is Istio's: a bare protocol match and the
	// conntrack state before addresses, ports after them.
	proto := m.Proto
	if proto == "" && r.Table == ipt.Mangle && r.Chain == "PREROUTING" && m.CTState == "INVALID" {
		// Istio's native mode drops invalid TCP only (its iptables mode
		// drops every protocol).
		proto = "tcp"
	}
	if proto != "" && len(ports) == 0 {
		terms = append(terms, l4Term{proto: proto})
	}
	// Istio's conntrack zone rules match the port before the address.
	portsFirst := r.Target.Kind == ipt.CTZone
	if portsFirst && len(ports) > 0 {
		terms = append(terms, l4Term{proto: m.Proto, ports: ports})
	}
	if m.CTState != "" {
		bits, err := parseCTState(m.CTState)
		if err != nil {
			return nil, err
		}
		terms = append(terms, ctStateTerm{bits: bits})
	}
	terms = append(terms, addrs...)
	if !portsFirst && len(ports) > 0 {
		terms = append(terms, l4Term{proto: m.Proto, ports: ports})
	}
	for _, o := range m.Owners {
		terms = append(terms, ownerTerm{gid: o.GID, id: o.ID, not: o.Not})
	}
	if m.Mark != nil {
		terms = append(terms, markTerm{value: m.Mark.Value, not: m.Mark.Not})
	}
	if m.ConnMark != nil {
		terms = append(terms, markTerm{ct: true, value: m.ConnMark.Value, not: m.ConnMark.Not})
	}

	t := r.Target
	rule := func(ts ...term) *Rule {
		return &Rule{Family: f, Purpose: r.Purpose, terms: slices.Concat(terms, []term{counterStmt{}}, ts)}
	}
	needProto := func(what string) error {
		if m.Proto == "" {
			return fmt.Errorf("%s needs a protocol match (-p tcp or -p udp)", what)
		}
		return nil
	}
	needTable := func(what, table string) error {
		if r.Table != table {
			return fmt.Errorf("%s is only valid in the %s table", what, table)
		}
		return nil
	}
	switch t.Kind {
	case ipt.Jump:
		if t.Chain == "" {
			return nil, errors.New("jump without a chain")
		}
		return []*Rule{rule(verdictTerm{kind: ipt.Jump, chain: ChainName(t.Chain)})}, nil
	case ipt.Return, ipt.Accept, ipt.Drop:
		return []*Rule{rule(verdictTerm{kind: t.Kind})}, nil
	case ipt.Redirect:
		if err := errors.Join(needProto("REDIRECT"), needTable("REDIRECT", ipt.NAT)); err != nil {
			return nil, err
		}
		if t.Port == 0 {
			return nil, errors.New("REDIRECT to port 0")
		}
		return []*Rule{rule(redirectStmt{port: t.Port})}, nil
	case ipt.TProxy:
		if err := errors.Join(needProto("TPROXY"), needTable("TPROXY", ipt.Mangle)); err != nil {
			return nil, err
		}
		if t.Port == 0 {
			return nil, errors.New("TPROXY to port 0")
		}
		var addr netip.Addr
		if t.OnIP.IsValid() && !t.OnIP.IsUnspecified() {
			if t.OnIP.Zone() != "" || t.OnIP.Is4In6() || t.OnIP.Is6() != (f == ipt.IPv6) {
				return nil, fmt.Errorf("TPROXY address %s is not an %s address", t.OnIP, f)
			}
			addr = t.OnIP
		}
		// iptables' TPROXY marks and accepts a packet it found a transparent
		// socket for, and drops it otherwise. nft's tproxy statement instead
		// skips the rest of the rule when there is no socket, so a second
		// rule with the same match drops what the first did not take: new
		// inbound connections must not reach the app past a proxy that is
		// not listening yet.
		return []*Rule{
			{Family: f, Purpose: r.Purpose, terms: slices.Concat(terms, []term{tproxyStmt{v6: f == ipt.IPv6, addr: addr, port: t.Port}, setMarkStmt{value: t.Mark}, counterStmt{}, verdictTerm{kind: ipt.Accept}})},
			{Family: f, Purpose: r.Purpose + " (no proxy socket: drop, as iptables' TPROXY does)", terms: slices.Concat(terms, []term{counterStmt{}, verdictTerm{kind: ipt.Drop}})},
		}, nil
	case ipt.SetMark:
		return []*Rule{rule(setMarkStmt{value: t.Mark})}, nil
	case ipt.SaveConnMark:
		return []*Rule{rule(saveMarkStmt{})}, nil
	case ipt.RestoreConnMark:
		return []*Rule{rule(restoreMarkStmt{})}, nil
	case ipt.CTZone:
		if err := needTable("CT --zone", ipt.Raw); err != nil {
			return nil, err
		}
		return []*Rule{rule(ctZoneStmt{zone: t.Zone})}, nil
	default:
		return nil, fmt.Errorf("unsupported target kind %d", t.Kind)
	}
}

// ruleText names an iptables rule in errors. The iptables renderer panics
// on a target kind it does not know, so such rules are named by kind.
func ruleText(r ipt.Rule) string {
	if r.Target.Kind < ipt.Jump || r.Target.Kind > ipt.CTZone {
		return fmt.Sprintf("-A %s ... (target kind %d)", r.Chain, r.Target.Kind)
	}
	return r.String()
}

// checkIfname accepts the interface names iptables accepts that nft can
// also spell: at most 15 bytes, printable, no quote, and "+" only last.
func checkIfname(name string) error {
	base := strings.TrimSuffix(name, "+")
	if len(name) > 15 || base == "" {
		return fmt.Errorf("interface name %q: want 1 to 15 bytes", name)
	}
	for _, c := range base {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' || c == '*' || c == '+' || c == '/' {
			return fmt.Errorf("interface name %q: character %q not supported", name, c)
		}
	}
	return nil
}

// normalizePorts sorts a multiport list and drops duplicates; when it
// holds a range (an interval set) it also merges ranges that overlap or
// touch, which the kernel would refuse as separate elements.
func normalizePorts(in []ipt.PortRange) ([]ipt.PortRange, error) {
	rs := slices.Clone(in)
	for _, r := range rs {
		if r.Lo > r.Hi {
			return nil, fmt.Errorf("port range %s is empty", r)
		}
	}
	slices.SortFunc(rs, func(x, y ipt.PortRange) int {
		if x.Lo != y.Lo {
			return int(x.Lo) - int(y.Lo)
		}
		return int(x.Hi) - int(y.Hi)
	})
	rs = slices.Compact(rs)
	if !(portMatch{ranges: rs}).interval() {
		return rs, nil
	}
	var out []ipt.PortRange
	for _, r := range rs {
		if n := len(out); n > 0 && uint32(r.Lo) <= uint32(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// quoteComment makes a purpose safe to print after "#" on one line.
func quoteComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
