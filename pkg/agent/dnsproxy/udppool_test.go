package dnsproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// startPortUpstream answers every A question with 192.0.2.1 and TTL 0.
func startPortUpstream(t *testing.T) *fakeUpstream {
	return startFakeUpstream(t, func(q dns.Question, m *dns.Msg) {
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(192, 0, 2, 1)}}
	})
}

func poolQuery(name string) (*dns.Msg, []byte) {
	w, err := packName(name)
	if err != nil {
		panic(err)
	}
	b := upstreamWire([]byte(w), typeA, classINET, flagRD, false, 1232)
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		panic(err)
	}
	return m, b
}

// poolExchange is exchange with the answer unpacked.
func poolExchange(ctx context.Context, p *udpPool, deadline time.Time, b []byte) (*dns.Msg, error) {
	wire, err := p.exchange(ctx, deadline, b)
	if err != nil {
		return nil, err
	}
	r := new(dns.Msg)
	return r, r.Unpack(wire)
}

func TestPoolConcurrentQueriesShareSockets(t *testing.T) {
	up := startPortUpstream(t)
	p := newUDPPool(up.Addr)
	defer p.close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			name := dns.Fqdn(string(rune('a'+i%26)) + ".pool.example")
			_, b := poolQuery(name)
			r, err := poolExchange(context.Background(), p, time.Now().Add(5*time.Second), b)
			if err == nil && (r.Question[0].Name != name || len(r.Answer) != 1) {
				err = errors.New("answer for another question: " + r.Question[0].Name)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := up.sourcePorts(); n > poolSockets {
		t.Errorf("200 queries came from %d source ports, want at most %d", n, poolSockets)
	}
}

func TestPoolRotatesSockets(t *testing.T) {
	up := startPortUpstream(t)
	p := newUDPPool(up.Addr)
	p.size, p.maxUses = 1, 3
	defer p.close()
	for range 9 {
		_, b := poolQuery("rotate.example.")
		if _, err := p.exchange(t.Context(), soon(), b); err != nil {
			t.Fatal(err)
		}
	}
	if n := up.sourcePorts(); n != 3 {
		t.Errorf("9 queries with 3 uses a socket came from %d ports, want 3", n)
	}

	clock := time.Now()
	p.maxUses, p.now = 1000, func() time.Time { return clock }
	_, b := poolQuery("age.example.")
	if _, err := p.exchange(t.Context(), soon(), b); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(sockMaxAge)
	if _, err := p.exchange(t.Context(), soon(), b); err != nil {
		t.Fatal(err)
	}
	if n := up.sourcePorts(); n != 4 {
		t.Errorf("after a socket's age ran out: %d ports, want 4", n)
	}
}

func TestPoolCloseFailsWaiters(t *testing.T) {
	p := newUDPPool(blackhole(t))
	errc := make(chan error, 1)
	_, b := poolQuery("hang.example.")
	go func() {
		_, err := p.exchange(context.Background(), time.Now().Add(time.Minute), b)
		errc <- err
	}()
	polltest.Until(t, "the query on a socket", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.socks) > 0 // opened and registered under one lock
	})
	p.close()
	if err := <-errc; !errors.Is(err, errPoolClosed) {
		t.Fatalf("waiter got %v, want errPoolClosed", err)
	}
	if _, err := p.exchange(t.Context(), soon(), b); !errors.Is(err, errPoolClosed) {
		t.Fatalf("exchange after close: %v", err)
	}
}

func TestPoolRefusedUpstreamFailsFast(t *testing.T) {
	addr := freeUDPPort(t, randomLoopback()) // nothing listens: ICMP port unreachable
	p := newUDPPool(addr)
	defer p.close()
	_, b := poolQuery("refused.example.")
	_, err := p.exchange(t.Context(), time.Now().Add(10*time.Second), b)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if got := failureReason(err); got != "refused" {
		t.Errorf("failure reason %q for %v, want refused", got, err)
	}
}

// soon is a deadline no passing test reaches.
func soon() time.Time { return time.Now().Add(10 * time.Second) }

func TestPoolDeadline(t *testing.T) {
	p := newUDPPool(blackhole(t))
	defer p.close()
	_, b := poolQuery("silent.example.")
	_, err := p.exchange(t.Context(), time.Now().Add(50*time.Millisecond), b)
	if !errors.Is(err, context.DeadlineExceeded) || failureReason(err) != "timeout" {
		t.Fatalf("silent upstream: %v, want a timeout", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.socks {
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n != 0 {
			t.Errorf("a timed-out query is still pending on its socket")
		}
	}
}
