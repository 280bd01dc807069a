package dnsproxy

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkFast measures the precomputed-answer path for one packet, no I/O.
func BenchmarkFast(b *testing.B) {
	s, err := New(Config{SearchDomains: testSearch, Namespace: "default"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.UpdateTable(testTable())
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"mesh-A", rawQuery(b, "productpage.default.svc.cluster.local.", dns.TypeA, nil)},
		{"mesh-A-edns", rawQuery(b, "productpage.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })},
		{"mesh-cname", rawQuery(b, "reviews.default.default.svc.cluster.local.", dns.TypeA, nil)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			out := make([]byte, 0, 2048)
			var keyBuf []byte
			b.ReportAllocs()
			for b.Loop() {
				if resp, _ := s.fast(tc.pkt, out[:0], &keyBuf, false); resp == nil {
					b.Fatal("slow path")
				}
			}
		})
	}
}

// BenchmarkUDPRoundTrip measures a query through a real UDP socket.
func BenchmarkUDPRoundTrip(b *testing.B) {
	cfg := testConfig()
	s := startServer(b, cfg, nil)
	c, err := net.Dial("udp", addr4(s))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pkt := rawQuery(b, "reviews.default.svc.cluster.local.", dns.TypeA, nil)
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(pkt); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}
