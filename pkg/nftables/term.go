package nftables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// A term is one match or statement of a rule. Each term renders as the text
// nft lists for it and, on Linux, as the netlink expressions nft would
// generate for that text (expr_linux.go), so the two cannot drift apart.
type term interface {
	text() string
}

// nfprotoTerm matches the packet's family: "meta nfproto ipv4".
type nfprotoTerm struct{ v6 bool }

func (t nfprotoTerm) text() string { return "meta nfproto " + familyName(t.v6) }

func familyName(v6 bool) string {
	if v6 {
		return "ipv6"
	}
	return "ipv4"
}

// ifnameTerm matches the input or output interface by name; a name ending
// in "+" (iptables' wildcard) matches every interface with that prefix.
type ifnameTerm struct {
	out  bool
	name string
}

func (t ifnameTerm) text() string {
	key := "iifname"
	if t.out {
		key = "oifname"
	}
	name := t.name
	if p, ok := strings.CutSuffix(name, "+"); ok {
		name = p + "*"
	}
	return key + ` "` + name + `"`
}

// addrTerm matches the source or destination address against a prefix.
// The "meta nfproto" dependency it needs is emitted once per rule, before
// the first address (nft lists it implicitly).
type addrTerm struct {
	src    bool
	prefix netip.Prefix // masked
	not    bool
}

func (t addrTerm) v6() bool { return t.prefix.Addr().Is6() }

func (t addrTerm) text() string {
	proto := "ip"
	if t.v6() {
		proto = "ip6"
	}
	field := "daddr"
	if t.src {
		field = "saddr"
	}
	s := proto + " " + field + " "
	if t.not {
		s += "!= "
	}
	if t.prefix.IsSingleIP() {
		return s + t.prefix.Addr().String()
	}
	return s + t.prefix.String()
}

// portMatch is one port comparison: a single port or range, or an
// anonymous set of ports and ranges (iptables' multiport).
type portMatch struct {
	src    bool
	ranges []ipt.PortRange // sorted, not overlapping; len > 1 means a set
	not    bool
}

func (m portMatch) interval() bool {
	for _, r := range m.ranges {
		if r.Lo != r.Hi {
			return true
		}
	}
	return false
}

func rangeText(r ipt.PortRange) string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// l4Term matches the transport protocol and, optionally, ports. With ports
// the "meta l4proto" match is a dependency nft does not list.
type l4Term struct {
	proto string // "tcp" or "udp"
	ports []portMatch
}

func (t l4Term) text() string {
	if len(t.ports) == 0 {
		return "meta l4proto " + t.proto
	}
	parts := make([]string, len(t.ports))
	for i, m := range t.ports {
		field := "dport"
		if m.src {
			field = "sport"
		}
		s := t.proto + " " + field + " "
		if m.not {
			s += "!= "
		}
		if len(m.ranges) == 1 {
			s += rangeText(m.ranges[0])
		} else {
			elems := make([]string, len(m.ranges))
			for j, r := range m.ranges {
				elems[j] = rangeText(r)
			}
			s += "{ " + strings.Join(elems, ", ") + " }"
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

// ownerTerm matches the uid or gid of the sending socket.
type ownerTerm struct {
	gid bool
	id  uint32
	not bool
}

func (t ownerTerm) text() string {
	key := "meta skuid "
	if t.gid {
		key = "meta skgid "
	}
	if t.not {
		key += "!= "
	}
	return key + strconv.FormatUint(uint64(t.id), 10)
}

// Conntrack state bits, as the kernel defines them.
const (
	ctInvalid     = 1
	ctEstablished = 2
	ctRelated     = 4
	ctNew         = 8
	ctUntracked   = 64
)

// ctStates lists the states in the order nft prints them.
var ctStates = []struct {
	iptables, nft string
	bit           uint32
}{
	{"INVALID", "invalid", ctInvalid},
	{"ESTABLISHED", "established", ctEstablished},
	{"RELATED", "related", ctRelated},
	{"NEW", "new", ctNew},
	{"UNTRACKED", "untracked", ctUntracked},
}

func parseCTState(s string) (uint32, error) {
	var bits uint32
	for _, name := range strings.Split(s, ",") {
		found := false
		for _, st := range ctStates {
			if strings.EqualFold(name, st.iptables) {
				bits |= st.bit
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unsupported conntrack state %q in %q", name, s)
		}
	}
	return bits, nil
}

// ctStateTerm matches if the connection is in any of the states.
type ctStateTerm struct{ bits uint32 }

func (t ctStateTerm) text() string {
	var names []string
	for _, st := range ctStates {
		if t.bits&st.bit != 0 {
			names = append(names, st.nft)
		}
	}
	return "ct state " + strings.Join(names, ",")
}

// markTerm matches the packet mark or the connection mark exactly.
type markTerm struct {
	ct    bool
	value uint32
	not   bool
}

func (t markTerm) text() string {
	s := "meta mark "
	if t.ct {
		s = "ct mark "
	}
	if t.not {
		s += "!= "
	}
	return s + hex32(t.value)
}

func hex32(v uint32) string { return fmt.Sprintf("0x%08x", v) }

// setMarkStmt sets the packet mark: "meta mark set 0x00000539".
type setMarkStmt struct{ value uint32 }

func (t setMarkStmt) text() string { return "meta mark set " + hex32(t.value) }

// saveMarkStmt copies the packet mark to the connection (CONNMARK --save-mark).
type saveMarkStmt struct{}

func (saveMarkStmt) text() string { return "ct mark set meta mark" }

// restoreMarkStmt copies the connection mark to the packet (CONNMARK --restore-mark).
type restoreMarkStmt struct{}

func (restoreMarkStmt) text() string { return "meta mark set ct mark" }

// ctZoneStmt puts new connections in a conntrack zone (CT --zone).
type ctZoneStmt struct{ zone uint16 }

func (t ctZoneStmt) text() string { return "ct zone set " + strconv.Itoa(int(t.zone)) }

// redirectStmt redirects to a local port (REDIRECT --to-ports); it ends the rule's evaluation.
type redirectStmt struct{ port uint16 }

func (t redirectStmt) text() string { return "redirect to :" + strconv.Itoa(int(t.port)) }

// tproxyStmt hands the packet to a transparent socket on port (and addr,
// when set) of one family.
type tproxyStmt struct {
	v6   bool
	addr netip.Addr // invalid: the packet's destination address
	port uint16
}

func (t tproxyStmt) text() string {
	proto := "ip"
	if t.v6 {
		proto = "ip6"
	}
	to := ":" + strconv.Itoa(int(t.port))
	if t.addr.IsValid() {
		to = netip.AddrPortFrom(t.addr, t.port).String()
	}
	return "tproxy " + proto + " to " + to
}

// counterStmt counts the packets and bytes that reach it. Istio puts one
// on every rule, before the rule's first statement. It renders as nft
// lists a fresh counter (also valid input for "nft -f").
type counterStmt struct{}

func (counterStmt) text() string { return "counter packets 0 bytes 0" }

// statement reports whether t acts on the packet (as opposed to matching it).
func statement(t term) bool {
	switch t.(type) {
	case setMarkStmt, saveMarkStmt, restoreMarkStmt, ctZoneStmt, redirectStmt, tproxyStmt, verdictTerm, counterStmt:
		return true
	}
	return false
}

// verdictTerm ends a rule: jump, return, accept or drop.
type verdictTerm struct {
	kind  ipt.TargetKind // Jump, Return, Accept or Drop
	chain string         // nft name of the jump target
}

func (t verdictTerm) text() string {
	switch t.kind {
	case ipt.Jump:
		return "jump " + t.chain
	case ipt.Return:
		return "return"
	case ipt.Accept:
		return "accept"
	default:
		return "drop"
	}
}
