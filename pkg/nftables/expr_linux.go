package nftables

import (
	"fmt"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// anonSet is an anonymous constant set of ports a rule looks ports up in.
// It is added in the same transaction, just before the rule, and named by
// the kernel after its ID in the transaction.
type anonSet struct {
	id       uint32
	interval bool
	elems    []setElem
}

// setElem is a key of a set; in an interval set, the start of an interval
// or (intervalEnd) one past its end.
type setElem struct {
	key         []byte
	intervalEnd bool
}

const (
	// anonSetName asks the kernel to name the set (__set0, __set1, ...).
	anonSetName = "__set%d"
	// typeInetService is nft's data type of ports: 2 bytes, network order.
	typeInetService = 13
)

// compiler turns rules into netlink expressions: the expressions nft
// generates for the text the rule renders as (checked against nft in the
// tests), so that the kernel holds what "nft -f" of our dry run would load.
type compiler struct {
	setID uint32 // last set ID used in this transaction
}

// rule returns the expressions of r and the anonymous sets they use.
func (c *compiler) rule(r *Rule) ([]expr.Any, []anonSet, error) {
	var out []expr.Any
	var sets []anonSet
	guard := func(v6 bool) {
		proto := byte(unix.NFPROTO_IPV4)
		if v6 {
			proto = unix.NFPROTO_IPV6
		}
		out = append(out,
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}})
	}
	if r.explicitGuard() {
		guard(r.Family == ipt.IPv6)
	}
	guarded := false
	for _, t := range r.terms {
		switch t := t.(type) {
		case ifnameTerm:
			key := expr.MetaKeyIIFNAME
			if t.out {
				key = expr.MetaKeyOIFNAME
			}
			data := make([]byte, unix.IFNAMSIZ)
			copy(data, t.name)
			if base, ok := strings.CutSuffix(t.name, "+"); ok {
				data = []byte(base) // a prefix match: compare only its bytes
			}
			out = append(out, &expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data})
		case addrTerm:
			if !guarded {
				guard(t.v6())
				guarded = true
			}
			out = append(out, addrExprs(t)...)
		case l4Term:
			proto := byte(unix.IPPROTO_TCP)
			if t.proto == "udp" {
				proto = unix.IPPROTO_UDP
			}
			out = append(out,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}})
			for _, m := range t.ports {
				offset := uint32(2)
				if m.src {
					offset = 0
				}
				out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offset, Len: 2})
				if len(m.ranges) > 1 {
					s := c.portSet(m)
					sets = append(sets, s)
					out = append(out, &expr.Lookup{SourceRegister: 1, SetName: anonSetName, SetID: s.id, Invert: m.not})
					continue
				}
				out = append(out, portRangeExprs(m.ranges[0], m.not)...)
			}
		case ownerTerm:
			key := expr.MetaKeySKUID
			if t.gid {
				key = expr.MetaKeySKGID
			}
			out = append(out, &expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: cmpOp(t.not), Register: 1, Data: binaryutil.NativeEndian.PutUint32(t.id)})
		case ctStateTerm:
			out = append(out,
				&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(t.bits), Xor: make([]byte, 4)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)})
		case markTerm:
			var load expr.Any = &expr.Meta{Key: expr.MetaKeyMARK, Register: 1}
			if t.ct {
				load = &expr.Ct{Key: expr.CtKeyMARK, Register: 1}
			}
			out = append(out, load, &expr.Cmp{Op: cmpOp(t.not), Register: 1, Data: binaryutil.NativeEndian.PutUint32(t.value)})
		case setMarkStmt:
			out = append(out,
				&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(t.value)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
		case saveMarkStmt:
			out = append(out,
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Ct{Key: expr.CtKeyMARK, SourceRegister: true, Register: 1})
		case restoreMarkStmt:
			out = append(out,
				&expr.Ct{Key: expr.CtKeyMARK, Register: 1},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
		case ctZoneStmt:
			out = append(out,
				&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint16(t.zone)},
				&expr.Ct{Key: expr.CtKeyZONE, SourceRegister: true, Register: 1})
		case redirectStmt:
			out = append(out,
				&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(t.port)},
				&expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED})
		case tproxyStmt:
			fam := byte(unix.NFPROTO_IPV4)
			if t.v6 {
				fam = unix.NFPROTO_IPV6
			}
			tp := &expr.TProxy{Family: fam, TableFamily: unix.NFPROTO_INET, RegPort: 1}
			if t.addr.IsValid() {
				out = append(out, &expr.Immediate{Register: 1, Data: t.addr.AsSlice()})
				tp.RegAddr, tp.RegPort = 1, 2
			}
			out = append(out, &expr.Immediate{Register: tp.RegPort, Data: binaryutil.BigEndian.PutUint16(t.port)}, tp)
		case counterStmt:
			out = append(out, &expr.Counter{})
		case verdictTerm:
			v := &expr.Verdict{}
			switch t.kind {
			case ipt.Jump:
				v.Kind, v.Chain = expr.VerdictJump, t.chain
			case ipt.Return:
				v.Kind = expr.VerdictReturn
			case ipt.Accept:
				v.Kind = expr.VerdictAccept
			default:
				v.Kind = expr.VerdictDrop
			}
			out = append(out, v)
		default:
			return nil, nil, fmt.Errorf("rule %q: no expressions for term %T", r.String(), t)
		}
	}
	return out, sets, nil
}

func cmpOp(not bool) expr.CmpOp {
	if not {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// addrExprs loads the address and compares it with the prefix as nft does:
// a prefix on a byte boundary compares only its bytes; any other is masked.
func addrExprs(t addrTerm) []expr.Any {
	offset, size := uint32(16), 4 // IPv4 daddr
	switch {
	case t.v6() && t.src:
		offset, size = 8, 16
	case t.v6():
		offset, size = 24, 16
	case t.src:
		offset = 12
	}
	addr := t.prefix.Addr().AsSlice()
	bits := t.prefix.Bits()
	if bits > 0 && bits%8 == 0 {
		return []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(bits / 8)},
			&expr.Cmp{Op: cmpOp(t.not), Register: 1, Data: addr[:bits/8]},
		}
	}
	mask := make([]byte, size)
	for i := 0; i < bits; i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(size)},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(size), Mask: mask, Xor: make([]byte, size)},
		&expr.Cmp{Op: cmpOp(t.not), Register: 1, Data: addr},
	}
}

// portRangeExprs compares the loaded port with a port or range: nft
// compares a range with two comparisons, and a negated one with "range".
func portRangeExprs(r ipt.PortRange, not bool) []expr.Any {
	lo, hi := binaryutil.BigEndian.PutUint16(r.Lo), binaryutil.BigEndian.PutUint16(r.Hi)
	switch {
	case r.Lo == r.Hi:
		return []expr.Any{&expr.Cmp{Op: cmpOp(not), Register: 1, Data: lo}}
	case not:
		return []expr.Any{&expr.Range{Op: expr.CmpOpNeq, Register: 1, FromData: lo, ToData: hi}}
	default:
		return []expr.Any{
			&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: lo},
			&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: hi},
		}
	}
}

// portSet makes the anonymous set of a multiport match. IDs are assigned
// per transaction.
func (c *compiler) portSet(m portMatch) anonSet {
	c.setID++
	s := anonSet{id: c.setID, interval: m.interval()}
	if !s.interval {
		for _, r := range m.ranges {
			s.elems = append(s.elems, setElem{key: binaryutil.BigEndian.PutUint16(r.Lo)})
		}
		return s
	}
	// An interval set holds the start of each interval and the end (one
	// past it) flagged, starting with the end of the gap before the first.
	if m.ranges[0].Lo > 0 {
		s.elems = append(s.elems, setElem{key: binaryutil.BigEndian.PutUint16(0), intervalEnd: true})
	}
	for _, r := range m.ranges {
		s.elems = append(s.elems, setElem{key: binaryutil.BigEndian.PutUint16(r.Lo)})
		if r.Hi < 0xffff {
			s.elems = append(s.elems, setElem{key: binaryutil.BigEndian.PutUint16(r.Hi + 1), intervalEnd: true})
		}
	}
	return s
}
