package nftables

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// TestExprsEncodeAsTheLibrary compares putExpr, byte for byte, with the
// netlink library's Marshal of the same expression: every expression the
// compiler emits for the kitchen sink in each family and both, and the
// fields of those types it leaves at zero.
func TestExprsEncodeAsTheLibrary(t *testing.T) {
	var exprs []expr.Any
	for _, fams := range [][]ipt.Family{{ipt.IPv4}, {ipt.IPv6}, {ipt.IPv4, ipt.IPv6}} {
		p := kitchenProgram(t, fams...)
		c := &compiler{}
		for _, tb := range p.Tables {
			for _, ch := range tb.Chains {
				for _, r := range ch.Rules {
					out, _, err := c.rule(r)
					if err != nil {
						t.Fatal(err)
					}
					exprs = append(exprs, out...)
				}
			}
		}
	}
	exprs = append(exprs,
		&expr.Counter{Bytes: 1 << 40, Packets: 7},
		&expr.Ct{Key: expr.CtKeyPROTODST, Register: 2, Direction: 1},
		&expr.Redir{RegisterProtoMin: 1, RegisterProtoMax: 2, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED},
		&expr.Range{Op: expr.CmpOpEq, FromData: []byte{0, 1}, ToData: []byte{0, 9}},
		&expr.Lookup{SetName: "ports", SetID: 3},
		&expr.Verdict{Kind: expr.VerdictGoto, Chain: "a-chain-name-of-odd-length"},
	)
	seen := map[string]bool{}
	for _, e := range exprs {
		data, err := expr.Marshal(unix.NFPROTO_INET, e)
		if err != nil {
			t.Fatalf("%#v: %v", e, err)
		}
		want, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		var got attrs
		if err := putExpr(&got, e); err != nil {
			t.Fatalf("%#v: %v", e, err)
		}
		if !bytes.Equal(got.b, want) {
			t.Errorf("%#v:\n got %x\nwant %x", e, got.b, want)
		}
		seen[fmt.Sprintf("%T", e)] = true
	}
	for _, name := range []string{"Meta", "Cmp", "Payload", "Lookup", "Range", "Ct", "Bitwise", "Immediate", "Redir", "TProxy", "Counter", "Verdict"} {
		if !seen["*expr."+name] {
			t.Errorf("no %s expression compared", name)
		}
	}
}

// TestExprsWithoutEncodingFail: an expression putExpr does not know, or a
// field of a known one it does not encode, is an error, never dropped.
func TestExprsWithoutEncodingFail(t *testing.T) {
	for _, e := range []expr.Any{
		&expr.Log{},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Len: 2},
		&expr.Payload{DestRegister: 1, Len: 2, CsumType: expr.CsumTypeInet},
		&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 2, SetName: "s"},
	} {
		var a attrs
		if err := putExpr(&a, e); err == nil {
			t.Errorf("%#v: encoded", e)
		}
	}
}

// TestOversizedAttributeFailsTheBatch: a nest past the 65535 bytes an
// attribute's length can say fails the commit before anything is sent (the
// connection has no socket: a send would fail otherwise).
func TestOversizedAttributeFailsTheBatch(t *testing.T) {
	c := &conn{fd: -1}
	b := c.newBatch()
	s := anonSet{id: 1}
	for i := range 8000 {
		s.elems = append(s.elems, setElem{key: []byte{byte(i >> 8), byte(i)}})
	}
	addSet(b, "istio-proxy-nat", s, step{text: "a set of 8000 ports"})
	err := c.commit(b)
	if err == nil || !strings.Contains(err.Error(), "over the 65535") {
		t.Fatalf("commit: %v, want the attribute named too long", err)
	}
}

// BenchmarkBatch encodes the batch of a first install of the kitchen sink
// (one family): the user-space half of BenchmarkApplyFresh.
func BenchmarkBatch(b *testing.B) {
	p, err := Translate([]*ipt.Ruleset{kitchenSink(ipt.IPv4)})
	if err != nil {
		b.Fatal(err)
	}
	c := &conn{fd: -1}
	b.ReportAllocs()
	for b.Loop() {
		bt := c.newBatch()
		for _, t := range p.Tables {
			if err := addTable(bt, t, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(p.RuleCount()), "rules")
}
