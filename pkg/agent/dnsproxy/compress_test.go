package dnsproxy

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// compressMsgs are answers with every kind of record compressRecords
// packs again, and one it declines.
func compressMsgs() map[string]*dns.Msg {
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 30}
	}
	msg := func(qname string, qtype uint16, rrs ...dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.Response = true
		for _, rr := range rrs {
			switch rr.Header().Rrtype {
			case dns.TypeNS, dns.TypeSOA:
				m.Ns = append(m.Ns, rr)
			default:
				if len(m.Ns) > 0 {
					m.Extra = append(m.Extra, rr)
				} else {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
		return m
	}
	var txts, addrs []dns.RR
	for i := range 20 {
		txts = append(txts, &dns.TXT{Hdr: hdr("Big.Example.", dns.TypeTXT), Txt: []string{strings.Repeat("t", i)}})
		addrs = append(addrs, &dns.A{Hdr: hdr("many.example.", dns.TypeA), A: net.IPv4(192, 0, 2, byte(i))},
			&dns.AAAA{Hdr: hdr("many.example.", dns.TypeAAAA), AAAA: net.ParseIP(fmt.Sprintf("2001:db8::%x", i))})
	}
	return map[string]*dns.Msg{
		"txt":       msg("big.example.", dns.TypeTXT, txts...),
		"addresses": msg("many.example.", dns.TypeA, addrs...),
		"names in data": msg("www.example.", dns.TypeA,
			&dns.CNAME{Hdr: hdr("www.example.", dns.TypeCNAME), Target: "web.cdn.example."},
			&dns.A{Hdr: hdr("web.cdn.example.", dns.TypeA), A: net.IPv4(192, 0, 2, 1)},
			&dns.MX{Hdr: hdr("www.example.", dns.TypeMX), Preference: 10, Mx: "mail.cdn.example."},
			&dns.SRV{Hdr: hdr("_x._tcp.www.example.", dns.TypeSRV), Priority: 1, Weight: 2, Port: 80, Target: "web.cdn.example."},
			&dns.PTR{Hdr: hdr("1.2.0.192.in-addr.arpa.", dns.TypePTR), Ptr: "web.cdn.example."},
			&dns.SOA{Hdr: hdr("example.", dns.TypeSOA), Ns: "ns.example.", Mbox: "hostmaster.example.", Serial: 7, Refresh: 1, Retry: 2, Expire: 3, Minttl: 4},
			&dns.NS{Hdr: hdr("cdn.example.", dns.TypeNS), Ns: "ns1.cdn.example."},
			&dns.A{Hdr: hdr("ns1.cdn.example.", dns.TypeA), A: net.IPv4(192, 0, 2, 53)}),
		"declined": msg("svc.example.", dns.TypeNAPTR,
			&dns.NAPTR{Hdr: hdr("svc.example.", dns.TypeNAPTR), Order: 1, Flags: "s", Service: "x", Replacement: "svc.example."}),
	}
}

// TestCompressRecords packs upstream answers that were not compressed
// again: the same question and records, read back by miekg/dns, in no
// more bytes than miekg/dns compresses them into (Istio's agent).
func TestCompressRecords(t *testing.T) {
	for name, m := range compressMsgs() {
		for _, compressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/compressed-%v", name, compressed), func(t *testing.T) {
				m.Compress = compressed
				wire, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				got, ok := compressWire(wire)
				if !ok {
					t.Fatal("packed answer does not walk")
				}
				if name == "declined" {
					if got != nil {
						t.Fatalf("NAPTR data may hold names: want nil, got %d bytes", len(got))
					}
					return
				}
				if got == nil && compressed {
					return // every owner a pointer already: nothing to gain
				}
				if got == nil {
					t.Fatal("declined")
				}
				sameRecords(t, wire, got)
				m.Compress = true
				best, _ := m.Pack()
				if len(got) > len(best) {
					t.Fatalf("%d bytes, miekg/dns compresses into %d", len(got), len(best))
				}
				t.Logf("%d bytes from %d (miekg/dns: %d)", len(got), len(wire), len(best))
			})
		}
	}
}

// FuzzCompressRecords: whatever compressRecords packs again reads back
// (miekg/dns) as the same question and records as its input.
func FuzzCompressRecords(f *testing.F) {
	for _, m := range compressMsgs() {
		for _, c := range []bool{false, true} {
			m.Compress = c
			wire, _ := m.Pack()
			f.Add(wire)
		}
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		var m dns.Msg
		if m.Unpack(wire) != nil {
			return
		}
		if got, _ := compressWire(wire); got != nil {
			sameRecords(t, wire, got)
		}
	})
}

// compressWire runs compressRecords on a packed message, as the proxy
// does on answers it has taken apart; ok is false when the message does
// not walk (miekg/dns reads some that stop short of their counts).
func compressWire(wire []byte) (out []byte, ok bool) {
	spans, err := walkRRs(nil, wire)
	if err != nil {
		return nil, false
	}
	qEnd := headerLen
	for range int(wire[4])<<8 | int(wire[5]) {
		if qEnd, err = skipName(wire, qEnd); err != nil || qEnd+4 > len(wire) {
			return nil, false
		}
		qEnd += 4
	}
	return compressRecords(wire, qEnd, spans), true
}

// sameRecords fails unless got reads as want does: header, questions and
// every record.
func sameRecords(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g dns.Msg
	if err := w.Unpack(want); err != nil {
		t.Fatal(err)
	}
	if err := g.Unpack(got); err != nil {
		t.Fatalf("packed again, miekg/dns cannot read it: %v", err)
	}
	text := func(m *dns.Msg) []string {
		var s []string
		for _, rr := range slices.Concat(m.Answer, m.Ns, m.Extra) {
			s = append(s, rr.String())
		}
		return s
	}
	if w.MsgHdr != g.MsgHdr || !slices.Equal(w.Question, g.Question) || !slices.Equal(text(&w), text(&g)) {
		t.Fatalf("packed again as\n%v\nwant\n%v", &g, &w)
	}
}
