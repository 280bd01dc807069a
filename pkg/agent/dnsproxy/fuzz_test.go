package dnsproxy

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzHandlePacket feeds arbitrary packets to both answer paths of a
// server with the test table and no upstreams. Whatever the input, no
// panic; any answer parses, carries the query's ID, fits the client's
// buffer; and the fast path answers exactly like the slow path. The seed
// corpus (testdata/fuzz/FuzzHandlePacket plus the packets below) runs with
// plain "go test".
func FuzzHandlePacket(f *testing.F) {
	for _, tc := range badPackets(f) {
		f.Add(tc.pkt, false)
	}
	for _, name := range []string{"reviews.", "Reviews.Default.", "productpage.default.svc.cluster.local.",
		"x.wild.example.org.", "api.example.com.", "reviews.default.default.svc.cluster.local."} {
		f.Add(rawQuery(f, name, dns.TypeA, nil), false)
		f.Add(rawQuery(f, name, dns.TypeAAAA, func(m *dns.Msg) { m.SetEdns0(1232, true) }), true)
	}
	f.Add(rawQuery(f, "10.0.0.1.in-addr.arpa.", dns.TypePTR, nil), false)
	f.Add(rawQuery(f, "_http._tcp.reviews.default.svc.cluster.local.", dns.TypeSRV, nil), false)

	s, err := New(Config{SearchDomains: testSearch, Namespace: "default"}, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	s.UpdateTable(testTable())
	s.UpdateServicePorts(map[string][]ServicePort{"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}}})
	f.Cleanup(func() { _ = s.Close() })

	f.Fuzz(func(t *testing.T, pkt []byte, tcp bool) {
		var keyBuf []byte
		fast, _ := s.fast(pkt, nil, &keyBuf, tcp)
		slow := s.slow(context.Background(), pkt, tcp)
		if slow == nil {
			if fast != nil {
				t.Fatalf("fast path answered a packet the slow path drops")
			}
			return
		}
		limit := dns.MaxMsgSize
		if q := new(dns.Msg); !tcp {
			limit = dns.MinMsgSize
			if q.Unpack(pkt) == nil && q.IsEdns0() != nil {
				limit = max(int(q.IsEdns0().UDPSize()), dns.MinMsgSize)
			}
		}
		for path, b := range map[string][]byte{"slow": slow, "fast": fast} {
			if b == nil {
				continue
			}
			r := new(dns.Msg)
			if err := r.Unpack(b); err != nil {
				t.Fatalf("%s answer does not parse: %v", path, err)
			}
			if r.Id != binary.BigEndian.Uint16(pkt) || !r.Response {
				t.Fatalf("%s answer has id %#x response %v", path, r.Id, r.Response)
			}
			if len(b) > limit {
				t.Fatalf("%s answer of %d bytes exceeds the client's %d", path, len(b), limit)
			}
		}
		if fast != nil {
			if a, b := canonicalAnswer(t, fast), canonicalAnswer(t, slow); a != b {
				t.Fatalf("fast and slow paths differ:\nfast: %s\nslow: %s", a, b)
			}
		}
	})
}

// canonicalAnswer renders a response for comparison: header flags, rcode
// and sorted records in lower case (address rotation changes the order).
func canonicalAnswer(t *testing.T, b []byte) string {
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	var rrs []string
	for _, sec := range [][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			rrs = append(rrs, strings.ToLower(rr.String()))
		}
	}
	slices.Sort(rrs)
	r.Answer, r.Ns, r.Extra = nil, nil, nil
	return strings.ToLower(r.MsgHdr.String()) + " q=" + strings.ToLower(r.Question[0].String()) + " " + strings.Join(rrs, " ; ")
}
