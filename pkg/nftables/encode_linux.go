package nftables

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// putExpr appends e as an element of a rule's expression list: its name and
// its data, attribute for attribute as the netlink library's Marshal lays
// them out (TestExprsEncodeAsTheLibrary), without the half dozen buffers
// Marshal builds and copies for each. It covers the expressions the
// compiler emits and rejects any other.
func putExpr(a *attrs, e expr.Any) error {
	elem := a.nest(unix.NFTA_LIST_ELEM)
	var data int
	// named starts the expression's data after its kernel name.
	named := func(name string) {
		a.str(unix.NFTA_EXPR_NAME, name)
		data = a.nest(unix.NFTA_EXPR_DATA)
	}
	switch e := e.(type) {
	case *expr.Meta:
		named("meta")
		a.u32(unix.NFTA_META_KEY, uint32(e.Key))
		a.u32(registerAttr(e.SourceRegister, unix.NFTA_META_SREG, unix.NFTA_META_DREG), e.Register)
	case *expr.Cmp:
		named("cmp")
		a.u32(unix.NFTA_CMP_SREG, e.Register)
		a.u32(unix.NFTA_CMP_OP, uint32(e.Op))
		a.value(unix.NFTA_CMP_DATA, e.Data)
	case *expr.Payload:
		if e.OperationType != expr.PayloadLoad || e.CsumType != 0 {
			return fmt.Errorf("no netlink encoding for a payload write or checksum")
		}
		named("payload")
		a.u32(unix.NFTA_PAYLOAD_DREG, e.DestRegister)
		a.u32(unix.NFTA_PAYLOAD_BASE, uint32(e.Base))
		a.u32(unix.NFTA_PAYLOAD_OFFSET, e.Offset)
		a.u32(unix.NFTA_PAYLOAD_LEN, e.Len)
	case *expr.Lookup:
		if e.IsDestRegSet {
			return fmt.Errorf("no netlink encoding for a lookup into a register")
		}
		named("lookup")
		a.u32Set(unix.NFTA_LOOKUP_SREG, e.SourceRegister)
		if e.Invert {
			a.u32(unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)
		}
		a.str(unix.NFTA_LOOKUP_SET, e.SetName)
		a.u32(unix.NFTA_LOOKUP_SET_ID, e.SetID)
	case *expr.Range:
		named("range")
		a.u32Set(unix.NFTA_RANGE_SREG, e.Register)
		a.u32(unix.NFTA_RANGE_OP, uint32(e.Op))
		if len(e.FromData) > 0 {
			a.value(unix.NFTA_RANGE_FROM_DATA, e.FromData)
		}
		if len(e.ToData) > 0 {
			a.value(unix.NFTA_RANGE_TO_DATA, e.ToData)
		}
	case *expr.Ct:
		named("ct")
		a.u32(unix.NFTA_CT_KEY, uint32(e.Key))
		a.u32(registerAttr(e.SourceRegister, unix.NFTA_CT_SREG, unix.NFTA_CT_DREG), e.Register)
		switch e.Key {
		case expr.CtKeySRC, expr.CtKeyDST, expr.CtKeyPROTOSRC, expr.CtKeyPROTODST:
			a.u32(unix.NFTA_CT_DIRECTION, e.Direction)
		}
	case *expr.Bitwise:
		named("bitwise")
		a.u32(unix.NFTA_BITWISE_SREG, e.SourceRegister)
		a.u32(unix.NFTA_BITWISE_DREG, e.DestRegister)
		a.u32(unix.NFTA_BITWISE_LEN, e.Len)
		a.value(unix.NFTA_BITWISE_MASK, e.Mask)
		a.value(unix.NFTA_BITWISE_XOR, e.Xor)
	case *expr.Immediate:
		named("immediate")
		a.u32(unix.NFTA_IMMEDIATE_DREG, e.Register)
		a.value(unix.NFTA_IMMEDIATE_DATA, e.Data)
	case *expr.Redir:
		named("redir")
		a.u32Set(unix.NFTA_REDIR_REG_PROTO_MIN, e.RegisterProtoMin)
		a.u32Set(unix.NFTA_REDIR_REG_PROTO_MAX, e.RegisterProtoMax)
		a.u32Set(unix.NFTA_REDIR_FLAGS, e.Flags)
	case *expr.TProxy:
		named("tproxy")
		a.u32(expr.NFTA_TPROXY_FAMILY, uint32(e.Family))
		a.u32(expr.NFTA_TPROXY_REG_PORT, e.RegPort)
		a.u32Set(expr.NFTA_TPROXY_REG_ADDR, e.RegAddr)
	case *expr.Counter:
		named("counter")
		a.u64(unix.NFTA_COUNTER_BYTES, e.Bytes)
		a.u64(unix.NFTA_COUNTER_PACKETS, e.Packets)
	case *expr.Verdict:
		// A verdict is an immediate into the verdict register.
		named("immediate")
		a.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT)
		imm := a.nest(unix.NFTA_IMMEDIATE_DATA)
		v := a.nest(unix.NFTA_DATA_VERDICT)
		a.u32(unix.NFTA_VERDICT_CODE, uint32(e.Kind))
		if e.Chain != "" {
			a.str(unix.NFTA_VERDICT_CHAIN, e.Chain)
		}
		a.end(v)
		a.end(imm)
	default:
		return fmt.Errorf("no netlink encoding for expression %T", e)
	}
	a.end(data)
	a.end(elem)
	return nil
}

// registerAttr is src's attribute when the expression reads its register,
// else dst's.
func registerAttr(read bool, src, dst uint16) uint16 {
	if read {
		return src
	}
	return dst
}
