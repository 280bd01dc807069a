package dnsproxy

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestFailureRcodeMovesOn(t *testing.T) {
	failing := startFakeUpstream(t, func(q dns.Question, m *dns.Msg) { m.Rcode = dns.RcodeServerFailure })
	good := startFakeUpstream(t, func(q dns.Question, m *dns.Msg) {
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 3)}}
	})
	for _, parallel := range []bool{false, true} {
		cfg := testConfig(failing.Addr, good.Addr)
		cfg.ForwardParallel = parallel
		s := startServer(t, cfg, nil)
		r := ask(t, "udp", addr4(s), "moves-on.example.", dns.TypeA, 0)
		if got := addrsOf(r); len(got) != 1 || got[0] != "192.0.2.3" {
			t.Errorf("parallel=%v: want the second server's answer, got %v", parallel, r)
		}
	}
}

// TestIgnoresForgedAnswers checks that datagrams with the wrong ID or
// question are ignored and the real answer still wins.
func TestIgnoresForgedAnswers(t *testing.T) {
	pc, err := net.ListenPacket("udp", netip.AddrPortFrom(randomLoopback(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			answer := func(id uint16, name string, ip net.IP) {
				m := new(dns.Msg)
				m.SetReply(q)
				m.Id = id
				m.Question[0].Name = name
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: ip}}
				b, _ := m.Pack()
				_, _ = pc.WriteTo(b, from)
			}
			answer(q.Id+1, q.Question[0].Name, net.IPv4(6, 6, 6, 6)) // wrong ID
			answer(q.Id, "other.example.", net.IPv4(6, 6, 6, 7))     // wrong question
			answer(q.Id, q.Question[0].Name, net.IPv4(192, 0, 2, 4))
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	s := startServer(t, testConfig(pc.LocalAddr().(*net.UDPAddr).AddrPort()), nil)
	r := ask(t, "udp", addr4(s), "forged.example.", dns.TypeA, 0)
	if got := addrsOf(r); len(got) != 1 || got[0] != "192.0.2.4" {
		t.Fatalf("want the genuine answer, got %v", r)
	}
}

// TestCloseInterruptsForwarding checks that Close does not wait for
// upstream timeouts.
func TestCloseInterruptsForwarding(t *testing.T) {
	cfg := testConfig(blackhole(t))
	cfg.Timeout, cfg.AttemptTimeout = 30*time.Second, 30*time.Second
	s, err := New(cfg, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp", "tcp"} {
		c, err := net.Dial(network, addr4(s))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		q := rawQuery(t, "hang.example.", dns.TypeA, nil)
		if network == "tcp" {
			q = append([]byte{0, byte(len(q))}, q...)
		}
		if _, err := c.Write(q); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // both queries now wait on the upstream
	start := time.Now()
	_ = s.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v while queries waited on a silent upstream", took)
	}
}
