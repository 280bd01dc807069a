package dnsproxy

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// startTruncatingUpstream answers every query over UDP with TC and over
// TCP with one A record, on one address; closeAfter makes it close each TCP
// connection after its first answer. It returns the address and the TCP
// listener.
func startTruncatingUpstream(t *testing.T, closeAfter bool) (netip.AddrPort, *countingListener) {
	t.Helper()
	addr := freeUDPPort(t, randomLoopback())
	answer := func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Truncated = true
		} else {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(192, 0, 2, 9)}}
		}
		_ = w.WriteMsg(m)
		if closeAfter {
			_ = w.Close()
		}
	}
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: tl}
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: cl}} {
		started := make(chan struct{})
		srv.Handler, srv.NotifyStartedFunc = dns.HandlerFunc(answer), func() { close(started) }
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	}
	return addr, cl
}

// TestTCPUpstreamReusesConnection: truncated answers are fetched over one
// TCP connection, in turn and at once.
func TestTCPUpstreamReusesConnection(t *testing.T) {
	addr, l := startTruncatingUpstream(t, false)
	s := startServer(t, testConfig(addr), nil)
	askEach(t, s, "seq-%d.example", 5)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			name := fmt.Sprintf("par-%d.example.", i)
			r, err := exchangeMsg("udp", addr4(s), name, dns.TypeA, 0)
			if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Name != name {
				t.Errorf("%s: %v %v", name, r, err)
			}
		})
	}
	wg.Wait()
	if got := s.fwd.ups[0].reqTCP.Value(); got != 25 {
		t.Errorf("%v queries over TCP, want 25", got)
	}
	if got := l.accepted.Load(); got != 1 {
		t.Errorf("the upstream accepted %d TCP connections, want 1", got)
	}
}

// TestTCPUpstreamClosedConnectionReplaced: when the upstream closes the
// kept connection, the next query opens a new one without failing.
func TestTCPUpstreamClosedConnectionReplaced(t *testing.T) {
	addr, l := startTruncatingUpstream(t, true)
	s := startServer(t, testConfig(addr), nil)
	askEach(t, s, "closed-%d.example", 3)
	if got := l.accepted.Load(); got != 3 {
		t.Errorf("the upstream accepted %d TCP connections, want 3 (one per query, as it closes each)", got)
	}
	if got := s.fwd.ups[0].failures.With("error").Value(); got != 0 {
		t.Errorf("%v failures recorded for a connection the upstream closed", got)
	}
}

// TestTCPPoolClosesIdleConnection: a connection no query uses is closed
// after the idle time, and the next query dials again.
func TestTCPPoolClosesIdleConnection(t *testing.T) {
	addr, l := startTruncatingUpstream(t, false)
	p := newTCPPool(addr)
	p.idle = 50 * time.Millisecond
	defer p.close()
	for i := range 2 {
		_, b := poolQuery(fmt.Sprintf("idle-%d.example.", i))
		if _, err := p.exchange(t.Context(), soon(), b); err != nil {
			t.Fatal(err)
		}
		polltest.Until(t, "the idle connection to close", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.cur == nil
		})
	}
	if got := l.accepted.Load(); got != 2 {
		t.Errorf("the upstream accepted %d TCP connections, want 2", got)
	}
}

// askEach asks for n names made from format, one after the other, and
// wants one address for each.
func askEach(t *testing.T, s *Server, format string, n int) {
	t.Helper()
	for i := range n {
		if r := ask(t, "udp", addr4(s), fmt.Sprintf(format, i), dns.TypeA, 0); len(r.Answer) != 1 {
			t.Fatalf("query %d: %v", i, r)
		}
	}
}
