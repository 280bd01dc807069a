package dnsproxy

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestTruncatedAsMiekg serves upstream answers too big for the client,
// from upstreams that compress and that do not, and holds the result to
// miekg/dns's Truncate (Istio's agent), which compresses what it cuts: TC
// set alike, the OPT record kept, the records a leading run of the
// upstream's in section order, at least as many as Truncate keeps (which
// estimates compressed lengths from above) and within the client's buffer.
func TestTruncatedAsMiekg(t *testing.T) {
	txt := func(name string, n, size int, ttl uint32) []dns.RR {
		var rrs []dns.RR
		for i := range n {
			rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl},
				Txt: strings.SplitAfter(strings.Repeat(string(rune('a'+i%26)), size+i%7), strings.Repeat(string(rune('a'+i%26)), 200))})
		}
		return rrs
	}
	glue := func(n int) []dns.RR {
		var rrs []dns.RR
		for i := range n {
			rrs = append(rrs, &dns.A{Hdr: dns.RR_Header{Name: fmt.Sprintf("ns%d.big.example.", i), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(192, 0, 2, byte(i))})
		}
		return rrs
	}
	shapes := map[string]func(m *dns.Msg){
		"answers only":    func(m *dns.Msg) { m.Answer = txt(m.Question[0].Name, 40, 30, 5) },
		"one huge record": func(m *dns.Msg) { m.Answer = txt(m.Question[0].Name, 1, 1500, 5) },
		"authority and glue": func(m *dns.Msg) {
			m.Answer = txt(m.Question[0].Name, 8, 40, 5)
			for i := range 6 {
				m.Ns = append(m.Ns, &dns.NS{Hdr: dns.RR_Header{Name: "big.example.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60},
					Ns: fmt.Sprintf("ns%d.big.example.", i)})
			}
			m.Extra = glue(6)
		},
	}
	for shape, fill := range shapes {
		for _, edns := range []uint16{0, 600, 1232, 4096} {
			for _, compress := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/edns-%d/compressed-%v", shape, edns, compress), func(t *testing.T) {
					req := new(dns.Msg)
					req.SetQuestion("Big.Example.", dns.TypeTXT)
					req.Id = 0x4242
					if edns > 0 {
						req.SetEdns0(edns, false)
					}
					pkt, err := req.Pack()
					if err != nil {
						t.Fatal(err)
					}
					up := new(dns.Msg)
					up.SetQuestion("big.example.", dns.TypeTXT)
					up.Response, up.RecursionAvailable, up.Compress = true, true, compress
					fill(up)
					wire, err := up.Pack()
					if err != nil {
						t.Fatal(err)
					}
					a, _ := upstreamAnswer(wire)
					r, err := parseRequest(pkt)
					if err != nil {
						t.Fatal(err)
					}
					out := serve(a, &r.q, r.pkt, 0, nil, r.q.udpSize)
					var got dns.Msg
					if err := got.Unpack(out); err != nil {
						t.Fatal(err)
					}

					// What Istio's agent makes of the same answer.
					want := up.Copy()
					want.Id, want.Question = req.Id, req.Question
					limit := dns.MinMsgSize
					if edns > 0 {
						want.SetEdns0(ourUDPSize, false)
						limit = int(edns)
					}
					want.Truncate(limit)
					n := func(m *dns.Msg) int { return len(m.Answer) + len(m.Ns) + len(m.Extra) }
					extra := len(got.Extra)
					if got.IsEdns0() != nil {
						extra--
					}
					prefix := len(got.Answer) == len(up.Answer) || len(got.Ns)+extra == 0
					prefix = prefix && (len(got.Ns) == len(up.Ns) || extra == 0)
					if got.Truncated != want.Truncated || n(&got) < n(want) || !prefix || (got.IsEdns0() != nil) != (edns > 0) {
						t.Fatalf("served tc=%v %d/%d/%d records, miekg/dns tc=%v %d/%d/%d", got.Truncated, len(got.Answer), len(got.Ns), len(got.Extra),
							want.Truncated, len(want.Answer), len(want.Ns), len(want.Extra))
					}
					if len(out) > max(limit, dns.MinMsgSize) {
						t.Fatalf("%d bytes for a client that takes %d", len(out), limit)
					}
					if got.Question[0].Name != "Big.Example." || got.Id != req.Id {
						t.Fatalf("question %v id %#x, want the client's", got.Question[0], got.Id)
					}
				})
			}
		}
	}
}

// BenchmarkTruncate serves a 2 kB upstream answer (30 TXT records) to a
// client of 512 bytes, from an upstream that compresses and from one that
// does not (whose names are compressed again before the cut).
func BenchmarkTruncate(b *testing.B) {
	for _, compress := range []bool{true, false} {
		b.Run(fmt.Sprintf("compressed-%v", compress), func(b *testing.B) {
			up := new(dns.Msg)
			up.SetQuestion("big.example.", dns.TypeTXT)
			up.Response, up.Compress = true, compress
			for i := range 30 {
				up.Answer = append(up.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "big.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
					Txt: []string{strings.Repeat(string(rune('a'+i%26)), 60)}})
			}
			wire, err := up.Pack()
			if err != nil {
				b.Fatal(err)
			}
			a, _ := upstreamAnswer(wire)
			req := new(dns.Msg)
			req.SetQuestion("big.example.", dns.TypeTXT)
			pkt, _ := req.Pack()
			r, err := parseRequest(pkt)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if out := serve(a, &r.q, r.pkt, 0, nil, r.q.udpSize); len(out) > dns.MinMsgSize || out[2]&0x02 == 0 {
					b.Fatalf("%d bytes, flags %#x", len(out), out[2])
				}
			}
		})
	}
}
