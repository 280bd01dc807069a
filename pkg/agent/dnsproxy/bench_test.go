package dnsproxy

import (
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"testing"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// tableServer is a server with the test table that is never started.
func tableServer(b *testing.B) *Server {
	s, err := New(Config{SearchDomains: testSearch, Namespace: "default"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	s.UpdateTable(testTable())
	return s
}

// BenchmarkFast measures the precomputed-answer path for one packet, no I/O.
func BenchmarkFast(b *testing.B) {
	s := tableServer(b)
	s.UpdateServicePorts(map[string][]ServicePort{"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}, {Name: "grpc", Port: 9090}}})
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"mesh-A", rawQuery(b, "productpage.default.svc.cluster.local.", dns.TypeA, nil)},
		{"mesh-A-edns", rawQuery(b, "productpage.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })},
		{"mesh-cname", rawQuery(b, "reviews.default.default.svc.cluster.local.", dns.TypeA, nil)},
		{"mesh-short", rawQuery(b, "reviews.default.", dns.TypeA, nil)},
		{"mesh-PTR", rawQuery(b, "10.0.1.10.in-addr.arpa.", dns.TypePTR, nil)},
		{"mesh-SRV", rawQuery(b, "_http._tcp.reviews.default.svc.cluster.local.", dns.TypeSRV, nil)},
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

// BenchmarkSlow measures the slow path for one packet, no I/O: queries
// the fast path declines, answered from the table.
func BenchmarkSlow(b *testing.B) {
	s := tableServer(b)
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"wildcard-A", rawQuery(b, "x.wild.example.org.", dns.TypeA, nil)},
		{"mesh-A-two-opt-options", rawQuery(b, "productpage.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_EXPIRE{Code: dns.EDNS0EXPIRE})
		})},
		{"notify", rawQuery(b, "reviews.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if resp := s.slow(b.Context(), tc.pkt, false); resp == nil {
					b.Fatal("no answer")
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

// benchTable is a NameTable of n Kubernetes services in namespace bench,
// each with one IPv4 cluster IP, as istiod sends for n Services.
func benchTable(n int) *nds.NameTable {
	nt := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}}
	for i := range n {
		short := fmt.Sprintf("svc-%04d", i)
		nt.Table[short+".bench.svc.cluster.local"] = &nds.NameTable_NameInfo{
			Ips: []string{fmt.Sprintf("10.100.%d.%d", i/250, i%250+1)}, Registry: "Kubernetes", Shortname: short, Namespace: "bench",
		}
	}
	return nt
}

// BenchmarkTableMemory reports the live heap the table (and port index) of a
// 1000-service table take, per service, for a pod in another namespace
// (as the agent's benchmark runs), with and without service ports (SRV).
func BenchmarkTableMemory(b *testing.B) {
	nt := benchTable(1000)
	ports := map[string][]ServicePort{}
	for h := range nt.Table {
		ports[h] = []ServicePort{{Name: "http", Port: 8080}}
	}
	for _, tc := range []struct {
		name  string
		ports map[string][]ServicePort
	}{{"no-ports", nil}, {"one-port", ports}} {
		b.Run(tc.name, func(b *testing.B) {
			var questions int
			var bytes, inuse uint64
			for b.Loop() {
				before, beforeInuse := liveHeap()
				var idx *portIndex
				if tc.ports != nil {
					idx = newPortIndex(tc.ports)
				}
				tb := buildTable(nt, tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch, ports: idx}, slog.New(slog.DiscardHandler))
				after, afterInuse := liveHeap()
				bytes += after - before
				inuse += afterInuse - beforeInuse
				questions = tb.questions
				runtime.KeepAlive(tb)
			}
			b.ReportMetric(float64(bytes)/float64(b.N)/1000, "B/service")
			// Spans in use: the live bytes plus the free slots of spans
			// that hold any (what stays resident).
			b.ReportMetric(float64(inuse)/float64(b.N)/1000, "inuse-B/service")
			b.ReportMetric(float64(questions)/1000, "questions/service")
		})
	}
}

// liveHeap is the live heap and the heap spans in use after a full
// collection.
func liveHeap() (alloc, inuse uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse
}
