package dnsproxy

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// forwardGoroutines counts the goroutines forwarding a query on the
// goroutine path: one per query, started by slowUDP.
func forwardGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "dnsproxy.(*Server).slowUDP") {
			n++
		}
	}
	return n
}

// TestEventPathHoldsNoGoroutinePerQuery keeps 64 distinct forwarded
// queries waiting on the upstream and counts the goroutines waiting for
// them: none on the event path, one per query on the goroutine path (here,
// parallel forwarding), which shows the count sees them.
func TestEventPathHoldsNoGoroutinePerQuery(t *testing.T) {
	for _, tc := range []struct {
		parallel bool
		want     int
	}{{false, 0}, {true, 64}} {
		t.Run(fmt.Sprintf("parallel=%v", tc.parallel), func(t *testing.T) {
			release := make(chan struct{})
			up := startFakeUpstream(t, func(q dns.Question, m *dns.Msg) {
				<-release
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(192, 0, 2, 1)}}
			})
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			t.Cleanup(unblock) // before the upstream's shutdown, which waits for its handlers
			cfg := testConfig(up.Addr)
			cfg.ForwardParallel = tc.parallel
			cfg.Timeout, cfg.AttemptTimeout = time.Minute, time.Minute // no retry while held
			s := startServer(t, cfg, nil)
			c, err := net.Dial("udp", addr4(s))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			names := map[uint16]string{}
			for i := range 64 {
				m := new(dns.Msg)
				m.SetQuestion(fmt.Sprintf("held-%d.example.", i), dns.TypeA)
				m.Id = uint16(1000 + i) // distinct, to match the replies
				names[m.Id] = m.Question[0].Name
				pkt, _ := m.Pack()
				if _, err := c.Write(pkt); err != nil {
					t.Fatal(err)
				}
			}
			held := func() int {
				n := 0
				for _, name := range names {
					n += up.count(name)
				}
				return n
			}
			if !polltest.Wait(polltest.Timeout, func() bool { return held() == 64 }) {
				t.Fatalf("the upstream holds %d of the 64 queries; the proxy dropped %v, got %v", held(),
					s.m.dropped.Value(), s.m.reqUDP.Value())
			}
			if got := forwardGoroutines(); got != tc.want {
				t.Errorf("%d goroutines serve 64 waiting queries, want %d", got, tc.want)
			}
			unblock()
			buf := make([]byte, 512)
			for range 64 {
				n, err := c.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				var r dns.Msg
				if err := r.Unpack(buf[:n]); err != nil || r.Question[0].Name != names[r.Id] || len(r.Answer) != 1 {
					t.Fatalf("reply %v (%v) does not answer query %d", &r, err, r.Id)
				}
			}
		})
	}
}

// TestEventPathCutDatagramGoesTCP: an upstream UDP answer larger than any
// the proxy asks for arrives cut; it is taken as truncated and fetched
// over TCP, never served cut.
func TestEventPathCutDatagramGoesTCP(t *testing.T) {
	var txt []string
	for i := range 40 {
		txt = append(txt, strings.Repeat(string(rune('a'+i%26)), 200))
	}
	addr := freeUDPPort(t, randomLoopback())
	for _, network := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: addr.String(), Net: network, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			for _, s := range txt {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{s}})
			}
			_ = w.WriteMsg(m) // over UDP too: about 8 KB, no TC
		})}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.ListenAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	}
	s := startServer(t, testConfig(addr), nil)
	r := ask(t, "udp", addr4(s), "cut.example", dns.TypeTXT, 4096)
	if !r.Truncated || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("an 8 KB answer for a 4096-byte client: want TC, got %v", r)
	}
	if got := s.fwd.ups[0].reqTCP.Value(); got != 1 {
		t.Errorf("upstream TCP requests %v, want 1 (the cut UDP answer is not served)", got)
	}
	r = ask(t, "tcp", addr4(s), "cut.example", dns.TypeTXT, 0)
	if len(r.Answer) != len(txt) {
		t.Errorf("over TCP: %d records, want %d", len(r.Answer), len(txt))
	}
}

// TestEventPathLongNames forwards names up to the longest a query can
// carry (255 bytes in wire form), whose upstream query and client packet
// no longer fit the flight's own buffer.
func TestEventPathLongNames(t *testing.T) {
	up := startPortUpstream(t)
	s := startServer(t, testConfig(up.Addr), nil)
	for _, wireLen := range []int{20, 120, 200, 240, 255} {
		// Labels of up to 63 bytes; each costs its length plus one.
		var labels []string
		for left := wireLen - 1; left > 0; {
			l := min(left-1, 63)
			if rest := left - 1 - l; rest == 1 { // a label needs at least 2 bytes
				l--
			}
			labels = append(labels, strings.Repeat(string(rune('a'+len(labels))), l))
			left -= l + 1
		}
		name := strings.Join(labels, ".") + "."
		if got := len(name) + 1; got != wireLen {
			t.Fatalf("test name is %d bytes in wire form, want %d", got, wireLen)
		}
		r := ask(t, "udp", addr4(s), name, dns.TypeA, 4096)
		if len(r.Answer) != 1 || r.Question[0].Name != name {
			t.Fatalf("%d-byte name: %v", wireLen, r)
		}
	}
}
