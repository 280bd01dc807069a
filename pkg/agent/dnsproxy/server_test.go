package dnsproxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

func TestMeshAnswers(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range []struct {
			name   string
			qtype  uint16
			rcode  int
			addrs  []string
			cnames int
		}{
			{"reviews.default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"REVIEWS.Default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"reviews.default.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00::1"}, 0},
			{"reviews", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"reviews.default", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"reviews.default.svc", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"reviews.default.svc.cluster", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 0},
			{"reviews.default.default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.1"}, 1},
			{"reviews.default.svc.cluster.local.default.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00::1"}, 1},
			{"ratings.other", dns.TypeA, dns.RcodeSuccess, []string{"10.0.1.1"}, 0},
			{"ratings.other.svc", dns.TypeA, dns.RcodeSuccess, []string{"10.0.1.1"}, 0},
			{"db-0.db.default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.10"}, 0},
			{"db-1.db.default", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.11"}, 0},
			{"api.example.com", dns.TypeA, dns.RcodeSuccess, []string{"240.240.0.1"}, 0},
			{"api.example.com", dns.TypeAAAA, dns.RcodeSuccess, nil, 0}, // known host, no v6: NODATA
			{"v6only.example.com", dns.TypeA, dns.RcodeSuccess, nil, 0},
			{"v6only.example.com", dns.TypeAAAA, dns.RcodeSuccess, []string{"2001:db8::5"}, 0},
			{"alias2.example.com", dns.TypeA, dns.RcodeSuccess, []string{"240.240.0.9"}, 0},
			{"x.wild.example.org", dns.TypeA, dns.RcodeSuccess, []string{"240.240.0.2", "240.240.0.3"}, 0},
			{"a.b.wild.example.org", dns.TypeA, dns.RcodeSuccess, []string{"240.240.0.2", "240.240.0.3"}, 0},
			{"x.wild.example.org.default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"240.240.0.2", "240.240.0.3"}, 1},
			{"x.wild.example.org", dns.TypeAAAA, dns.RcodeSuccess, nil, 0},
			// No upstreams: names the mesh does not know fail.
			{"ratings", dns.TypeA, dns.RcodeServerFailure, nil, 0},
			{"unknown.example.com", dns.TypeA, dns.RcodeServerFailure, nil, 0},
		} {
			t.Run(network+"/"+tc.name+"/"+dns.TypeToString[tc.qtype], func(t *testing.T) {
				r := ask(t, network, addr4(s), tc.name, tc.qtype, 0)
				if r.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s\n%v", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode], r)
				}
				got := addrsOf(r)
				slices.Sort(got)
				if diff := cmp.Diff(tc.addrs, got); diff != "" {
					t.Errorf("addresses (-want +got):\n%s\n%v", diff, r)
				}
				cnames := 0
				for _, rr := range r.Answer {
					if rr.Header().Rrtype == dns.TypeCNAME {
						cnames++
					}
					if tc.cnames == 0 && rr.Header().Name != r.Question[0].Name {
						// Every name of a host shares one answer, whose
						// records point at whatever question it serves.
						t.Errorf("record owned by %q, want the question's %q", rr.Header().Name, r.Question[0].Name)
					}
					if rr.Header().Ttl != meshTTL {
						t.Errorf("TTL %d, want %d", rr.Header().Ttl, meshTTL)
					}
				}
				if cnames != tc.cnames {
					t.Errorf("%d CNAMEs, want %d\n%v", cnames, tc.cnames, r)
				}
				if r.Rcode == dns.RcodeSuccess && (!r.Authoritative || !r.RecursionAvailable) {
					t.Errorf("mesh answer should be authoritative with RA: %v", r.MsgHdr)
				}
				if !strings.EqualFold(r.Question[0].Name, dns.Fqdn(tc.name)) || r.Question[0].Name != dns.Fqdn(tc.name) {
					t.Errorf("question %q, want the client's spelling %q", r.Question[0].Name, dns.Fqdn(tc.name))
				}
			})
		}
	}
}

func TestAddressRotation(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	for _, name := range []string{"productpage.default.svc.cluster.local", "productpage", "Productpage.Default.svc"} {
		seen := map[string]bool{}
		for range 6 {
			r := ask(t, "udp", addr4(s), name, dns.TypeA, 0)
			got := addrsOf(r)
			if len(got) != 3 {
				t.Fatalf("%s: want 3 addresses, got %v", name, got)
			}
			seen[got[0]] = true
		}
		if len(seen) != 3 {
			t.Errorf("%s: first address should rotate through all three, saw %v", name, seen)
		}
	}
}

func TestSRVAndPTR(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	s.UpdateServicePorts(map[string][]ServicePort{
		"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}, {Name: "grpc", Port: 9090, Protocol: "TCP"}},
	})
	for _, tc := range []struct {
		name  string
		ports []uint16
	}{
		{"_http._tcp.reviews.default.svc.cluster.local", []uint16{9080}},
		{"_9090._tcp.reviews.default.svc.cluster.local", []uint16{9090}},
		{"_grpc._tcp.reviews.default", []uint16{9090}},
		{"_HTTP._tcp.Reviews", []uint16{9080}},
		{"reviews.default", []uint16{9080, 9090}},
		{"reviews.default.svc.cluster.local", []uint16{9080, 9090}},
	} {
		r := ask(t, "udp", addr4(s), tc.name, dns.TypeSRV, 0)
		var ports []uint16
		for _, rr := range r.Answer {
			srv := rr.(*dns.SRV)
			ports = append(ports, srv.Port)
			if srv.Target != "reviews.default.svc.cluster.local." {
				t.Errorf("%s: SRV target %s", tc.name, srv.Target)
			}
			if srv.Hdr.Name != r.Question[0].Name || srv.Hdr.Ttl != meshTTL {
				t.Errorf("%s: SRV record %v, want it owned by the question with TTL %d", tc.name, srv, meshTTL)
			}
		}
		if diff := cmp.Diff(tc.ports, ports); diff != "" {
			t.Errorf("%s ports (-want +got):\n%s", tc.name, diff)
		}
		if len(r.Extra) != 2 {
			t.Errorf("%s: want the target's A and AAAA as additional records, got %v", tc.name, r.Extra)
		}
		for _, rr := range r.Extra {
			if rr.Header().Name != "reviews.default.svc.cluster.local." {
				t.Errorf("%s: additional record %v, want it owned by the target", tc.name, rr)
			}
		}
	}
	for ip, want := range map[string][]string{
		"10.0.0.1":  {"reviews.default.svc.cluster.local."},
		"fd00::1":   {"reviews.default.svc.cluster.local."},
		"10.1.0.10": {"db-0.db.default.svc.cluster.local.", "db.default.svc.cluster.local."},
	} {
		rev, _ := dns.ReverseAddr(ip)
		r := ask(t, "tcp", addr4(s), rev, dns.TypePTR, 0)
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.PTR).Ptr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("PTR %s (-want +got):\n%s", ip, diff)
		}
	}
}

func TestReadinessAndNDSZ(t *testing.T) {
	reg := promtext.NewRegistry()
	s, err := New(testConfig(), testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Ready() {
		t.Fatal("ready before the first name table")
	}
	rec := httptest.NewRecorder()
	s.NDSZHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/ndsz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("ndsz before table: %d", rec.Code)
	}
	s.UpdateTable(testTable())
	if !s.Ready() {
		t.Fatal("not ready after the name table")
	}
	rec = httptest.NewRecorder()
	s.NDSZHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/ndsz", nil))
	got := &nds.NameTable{}
	if err := json.Unmarshal(rec.Body.Bytes(), got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("ndsz: %d %v\n%s", rec.Code, err, rec.Body)
	}
	if diff := cmp.Diff(testTable(), got); diff != "" {
		t.Errorf("ndsz dumped a different table (-want +got):\n%s\n%s", diff, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if _, err := New(testConfig(), testLogger(t), reg); err == nil {
		t.Error("a second server on the same registry should fail to register its metrics")
	}
}

func TestMetrics(t *testing.T) {
	reg := promtext.NewRegistry()
	s := startServer(t, testConfig(), reg)
	ask(t, "udp", addr4(s), "reviews", dns.TypeA, 0)
	ask(t, "tcp", addr4(s), "reviews", dns.TypeA, 0)
	ask(t, "udp", addr4(s), "x.wild.example.org", dns.TypeA, 0)
	if got := s.m.reqUDP.Value(); got != 2 {
		t.Errorf("udp requests %v, want 2", got)
	}
	if got := s.m.reqTCP.Value(); got != 1 {
		t.Errorf("tcp requests %v, want 1", got)
	}
	if got := s.m.mesh.Value(); got != 3 {
		t.Errorf("mesh answers %v, want 3", got)
	}
	n, err := countSeries(reg, "dns_requests_total", "dns_upstream_requests_total",
		"dns_upstream_failures_total", "dns_upstream_request_duration_seconds", "dns_upstream_cache_hits_total")
	if err != nil || n < 3 {
		t.Errorf("gathered %d series: %v", n, err)
	}
	_ = s.Close()
	if n, _ := countSeries(reg); n != 0 {
		t.Errorf("%d series still registered after Close", n)
	}
}
