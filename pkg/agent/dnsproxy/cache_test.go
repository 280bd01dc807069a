package dnsproxy

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeUpstream is a scripted nameserver that counts the queries it gets
// and the source ports they come from.
type fakeUpstream struct {
	Addr   netip.AddrPort
	mu     sync.Mutex
	counts map[string]int
	ports  map[uint16]bool
}

// sourcePorts is how many source ports the queries came from.
func (f *fakeUpstream) sourcePorts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ports)
}

func (f *fakeUpstream) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[name]
}

// startFakeUpstream serves answer over UDP on a fresh loopback address.
func startFakeUpstream(t testing.TB, answer func(q dns.Question, m *dns.Msg)) *fakeUpstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", netip.AddrPortFrom(randomLoopback(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeUpstream{Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), counts: map[string]int{}, ports: map[uint16]bool{}}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			f.mu.Lock()
			f.counts[r.Question[0].Name]++
			f.ports[uint16(w.RemoteAddr().(*net.UDPAddr).Port)] = true
			f.mu.Unlock()
			m := new(dns.Msg)
			m.SetReply(r)
			answer(r.Question[0], m)
			_ = w.WriteMsg(m)
		})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return f
}

func soa(zone string, ttl, minttl uint32) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns." + zone, Mbox: "h." + zone, Serial: 1, Refresh: 60, Retry: 60, Expire: 600, Minttl: minttl}
}

func TestCachePolicy(t *testing.T) {
	up := startFakeUpstream(t, func(q dns.Question, m *dns.Msg) {
		a := &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}
		switch q.Name {
		case "pos.example.":
			m.Answer = []dns.RR{a}
		case "zero.example.":
			a.Hdr.Ttl = 0
			m.Answer = []dns.RR{a}
		case "nx.example.":
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa("example.", 60, 30)}
		case "nodata.example.":
			m.Ns = []dns.RR{soa("example.", 60, 30)}
		case "nosoa.example.":
			m.Rcode = dns.RcodeNameError
		case "fail.example.":
			m.Rcode = dns.RcodeServerFailure
		}
	})
	s := startServer(t, testConfig(up.Addr), nil)
	for _, tc := range []struct {
		name   string
		rcode  int
		cached bool
	}{
		{"pos.example.", dns.RcodeSuccess, true},
		{"zero.example.", dns.RcodeSuccess, false},
		{"nx.example.", dns.RcodeNameError, true},
		{"nodata.example.", dns.RcodeSuccess, true},
		{"nosoa.example.", dns.RcodeNameError, false},
		{"fail.example.", dns.RcodeServerFailure, false},
	} {
		for range 3 {
			if r := ask(t, "udp", addr4(s), tc.name, dns.TypeA, 0); r.Rcode != tc.rcode {
				t.Fatalf("%s: rcode %s, want %s", tc.name, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
		}
		want := 3
		if tc.cached {
			want = 1
		}
		if tc.name == "fail.example." {
			want = 3 * DefaultAttempts // every SERVFAIL is retried, never cached
		}
		if got := up.count(tc.name); got != want {
			t.Errorf("%s reached the upstream %d times, want %d", tc.name, got, want)
		}
	}
	// The DO bit asks a different question upstream: cached separately.
	m := new(dns.Msg)
	m.SetQuestion("pos.example.", dns.TypeA)
	m.SetEdns0(1232, true)
	if _, _, err := (&dns.Client{}).Exchange(m, addr4(s)); err != nil {
		t.Fatal(err)
	}
	if got := up.count("pos.example."); got != 2 {
		t.Errorf("a DO query should miss the non-DO entry: upstream saw %d queries", got)
	}
}

func TestCacheAgesTTLsAndExpires(t *testing.T) {
	c := newCache(100, time.Hour)
	resp := new(dns.Msg)
	resp.SetQuestion("age.example.", dns.TypeA)
	resp.Response = true
	resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "age.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
	key, _ := nameKey("age.example.", dns.TypeA)
	k := []byte(key + "\x00")
	if !cachePut(t, c, k, resp, 0) {
		t.Fatal("not cached")
	}
	a := c.get(k, 10*time.Second+time.Millisecond)
	if a == nil {
		t.Fatal("entry missing after 10s")
	}
	if ttl := answerMsg(t, a, 10*time.Second, key, nil).Answer[0].Header().Ttl; ttl != 50 {
		t.Errorf("TTL after 10s is %d, want 50", ttl)
	}
	if c.get(k, 60*time.Second) != nil {
		t.Error("entry still served after its TTL")
	}
	capped := newCache(100, 5*time.Second)
	cachePut(t, capped, k, resp, 0)
	if capped.get(k, 6*time.Second) != nil {
		t.Error("CacheMaxTTL not applied")
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := newCache(64, time.Hour)
	for i := range 2000 {
		resp := new(dns.Msg)
		name := dns.Fqdn(net.IPv4(10, 0, byte(i>>8), byte(i)).String() + ".example")
		resp.SetQuestion(name, dns.TypeA)
		resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		key, _ := nameKey(name, dns.TypeA)
		if !cachePut(t, c, []byte(key), resp, time.Duration(i)*time.Millisecond) {
			t.Fatalf("%s: not cached", name)
		}
	}
	if n := c.len(); n > 64 {
		t.Errorf("cache holds %d entries, bound is 64", n)
	}
}

func TestIdenticalQueriesCoalesce(t *testing.T) {
	release := make(chan struct{})
	up := startFakeUpstream(t, func(q dns.Question, m *dns.Msg) {
		<-release
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.IPv4(192, 0, 2, 1)}}
	})
	s := startServer(t, testConfig(up.Addr), nil)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if r, err := exchangeMsg("udp", addr4(s), "slow.example.", dns.TypeA, 0); err != nil || r.Rcode != dns.RcodeSuccess {
				t.Errorf("slow.example: %v %v", r, err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // let every query arrive while the first waits
	close(release)
	wg.Wait()
	if got := up.count("slow.example."); got != 1 {
		t.Errorf("upstream saw %d identical queries, want 1", got)
	}
}
