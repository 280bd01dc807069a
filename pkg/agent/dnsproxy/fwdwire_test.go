package dnsproxy

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// wireUpstream answers by name with the shapes the wire path must serve
// as the slow path does.
func wireUpstream(q dns.Question, m *dns.Msg) {
	hdr := func(name string, t uint16, ttl uint32) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	soa := &dns.SOA{Hdr: hdr("example.", dns.TypeSOA, 300), Ns: "ns.example.", Mbox: "h.example.", Serial: 1, Minttl: 60}
	switch strings.ToLower(q.Name) {
	case "a.example.":
		m.Authoritative, m.AuthenticatedData = true, true
		m.Answer = []dns.RR{&dns.A{Hdr: hdr(q.Name, dns.TypeA, 30), A: net.IPv4(192, 0, 2, 1)}}
	case "cname.example.":
		m.Answer = []dns.RR{&dns.CNAME{Hdr: hdr(q.Name, dns.TypeCNAME, 20), Target: "target.cname.example."},
			&dns.A{Hdr: hdr("target.cname.example.", dns.TypeA, 10), A: net.IPv4(192, 0, 2, 2)}}
	case "nx.example.":
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	case "nodata.example.":
		m.Ns = []dns.RR{soa}
	case "fail.example.":
		m.Rcode = dns.RcodeServerFailure
	case "big.example.":
		for i := range 40 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr(q.Name, dns.TypeTXT, 5), Txt: []string{strings.Repeat("x", 20) + string(rune('a'+i%26))}})
		}
	case "opt.example.":
		m.Answer = []dns.RR{&dns.A{Hdr: hdr(q.Name, dns.TypeA, 0), A: net.IPv4(192, 0, 2, 3)}}
		m.SetEdns0(4096, true)
	}
	m.Compress = true
}

// TestWireForwardMatchesSlowPath sends each query through the wire path
// and through the slow path (miekg/dns end to end) and wants the same
// reply, with nothing cached so both ask the upstream.
func TestWireForwardMatchesSlowPath(t *testing.T) {
	up := startFakeUpstream(t, wireUpstream)
	cfg := testConfig(up.Addr)
	cfg.CacheSize = -1
	s := startServer(t, cfg, nil)
	names := []string{"A.Example.", "cname.example.", "nx.example.", "nodata.example.", "fail.example.", "big.example.", "opt.example."}
	for _, name := range names {
		for _, c := range []struct {
			edns   uint16
			do, cd bool
			ad     bool
		}{{}, {edns: 1232}, {edns: 4096, do: true}, {edns: 1232, cd: true}, {ad: true}} {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			if name == "big.example." {
				req.Question[0].Qtype = dns.TypeTXT
			}
			req.CheckingDisabled, req.AuthenticatedData = c.cd, c.ad
			if c.edns > 0 {
				req.SetEdns0(c.edns, c.do)
			}
			pkt, err := req.Pack()
			if err != nil {
				t.Fatal(err)
			}
			slow := s.slow(t.Context(), pkt, false)
			var b dns.Msg
			if err := b.Unpack(slow); err != nil {
				t.Fatal(err)
			}
			// The goroutine path's forwardUDP, and the event path, which
			// serves the query as a client sends it.
			for path, wire := range map[string][]byte{"wire": s.forwardUDP(t.Context(), pkt), "event": udpRoundTrip(t, addr4(s), pkt)} {
				var a dns.Msg
				if err := a.Unpack(wire); err != nil {
					t.Fatalf("%s %+v: %s path reply: %v", name, c, path, err)
				}
				// Owner names that point at the question take the client's
				// spelling on the wire path, as cached answers do: names
				// compare without case, the question exactly.
				if strings.ToLower(a.String()) != strings.ToLower(b.String()) || a.Question[0].Name != name {
					t.Errorf("%s %+v: %s path\n%s\nslow path\n%s", name, c, path, a.String(), b.String())
				}
			}
		}
	}
}

func TestAnswerFromWire(t *testing.T) {
	pack := func(m *dns.Msg) []byte {
		t.Helper()
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	resp := func(name string) *dns.Msg {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m := new(dns.Msg)
		m.SetReply(q)
		return m
	}
	t.Run("positive: smallest TTL, OPT dropped, lower case", func(t *testing.T) {
		m := resp("Mixed.Example.")
		m.Authoritative = true
		wireUpstream(dns.Question{Name: "cname.example."}, m)
		m.SetEdns0(1232, false)
		a, ttl, ok := answerFromWire(pack(m))
		if !ok || ttl != 10*time.Second {
			t.Fatalf("ok %v ttl %v, want a 10 s answer", ok, ttl)
		}
		var got dns.Msg
		if err := got.Unpack(a.wire); err != nil {
			t.Fatal(err)
		}
		if got.Authoritative || !got.RecursionAvailable || got.IsEdns0() != nil || got.Question[0].Name != "mixed.example." || len(got.Answer) != 2 || len(a.age.ttls) != 2 {
			t.Fatalf("answer: %v", &got)
		}
	})
	t.Run("negative: SOA TTL capped by its minimum", func(t *testing.T) {
		m := resp("nx.example.")
		wireUpstream(dns.Question{Name: "nx.example."}, m)
		if _, ttl, ok := answerFromWire(pack(m)); !ok || ttl != 60*time.Second {
			t.Fatalf("ok %v ttl %v, want 60 s", ok, ttl)
		}
	})
	t.Run("truncated: served with TC, not cached", func(t *testing.T) {
		m := resp("tc.example.")
		wireUpstream(dns.Question{Name: "a.example."}, m)
		m.Truncated = true
		a, ttl, ok := answerFromWire(pack(m))
		if !ok || ttl != 0 || a.wire[2]&(flagTC>>8) == 0 {
			t.Fatalf("ok %v ttl %v, want an uncached answer with TC", ok, ttl)
		}
	})
	t.Run("failure: not cached", func(t *testing.T) {
		m := resp("fail.example.")
		m.Rcode = dns.RcodeServerFailure
		if _, ttl, ok := answerFromWire(pack(m)); !ok || ttl != 0 {
			t.Fatalf("ok %v ttl %v, want an uncached answer", ok, ttl)
		}
	})
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"a query, not a response", func(b []byte) []byte { b[2] &^= flagQR >> 8; return b }},
		{"short", func(b []byte) []byte { return b[:len(b)-3] }},
		{"compressed question", func(b []byte) []byte { return append(b[:headerLen], 0xC0, 0x0C, 0, 1, 0, 1) }},
	} {
		t.Run("refused: "+c.name, func(t *testing.T) {
			m := resp("a.example.")
			wireUpstream(dns.Question{Name: "a.example."}, m)
			if _, _, ok := answerFromWire(c.edit(pack(m))); ok {
				t.Fatal("answerFromWire took it apart")
			}
		})
	}
	t.Run("refused: OPT not last", func(t *testing.T) {
		m := resp("a.example.")
		m.SetEdns0(1232, false)
		m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "glue.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(192, 0, 2, 9)})
		if _, _, ok := answerFromWire(pack(m)); ok {
			t.Fatal("an OPT record before another additional record must not be taken apart")
		}
	})
}

// FuzzAnswerFromWire takes arbitrary upstream answers apart: a reused
// scratch answer comes out as a fresh one, every answer taken apart
// serves, and one cut to a small client's buffer stays whole records.
func FuzzAnswerFromWire(f *testing.F) {
	for _, name := range []string{"a.example.", "cname.example.", "nx.example.", "opt.example.", "big.example."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m := new(dns.Msg)
		m.SetReply(q)
		wireUpstream(q.Question[0], m)
		b, _ := m.Pack()
		f.Add(b)
	}
	// The event path's scratch answer, reused across inputs as a reader
	// reuses it across answers: it must come out as a fresh one does.
	var scratch answer
	var scratchBuf []byte
	f.Fuzz(func(t *testing.T, wire []byte) {
		a, ttl, ok := answerFromWire(wire)
		sttl, sok := scratch.fromWire(scratchBuf, wire)
		scratchBuf = scratch.wire[:0]
		if sok != ok || (ok && (sttl != ttl || !bytes.Equal(scratch.wire, a.wire) || scratch.qEnd != a.qEnd ||
			!slices.Equal(scratch.age.ttls, a.age.ttls))) {
			t.Fatalf("reused scratch answer differs from a fresh one (ok %v/%v)", sok, ok)
		}
		if !ok {
			// What the client gets instead: SERVFAIL or the upstream's
			// error, for its own question.
			fail, ttl := upstreamAnswer(wire)
			pkt := []byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1}
			q := query{id: 7, qEnd: len(pkt), udpSize: minUDPSize}
			out := serve(fail, &q, pkt, 0, nil, q.udpSize)
			if ttl != 0 || len(out) != len(pkt) || out[3]&rcodeMax == 0 || binary.BigEndian.Uint16(out) != 7 {
				t.Fatalf("answer not taken apart served as %x (ttl %v)", out, ttl)
			}
			return
		}
		if a.qEnd > len(a.wire) || len(a.wire) > len(wire) || binary.BigEndian.Uint16(a.wire) != 0 {
			t.Fatalf("bad answer: qEnd %d of %d", a.qEnd, len(a.wire))
		}
		for _, at := range a.age.ttls {
			if int(at.off)+4 > len(a.wire) {
				t.Fatalf("TTL offset %d out of %d", at.off, len(a.wire))
			}
		}
		q := query{id: 7, qEnd: a.qEnd, edns: true}
		if out := a.appendTo(nil, &q, a.wire, time.Hour, 65535); out == nil || binary.BigEndian.Uint16(out) != 7 {
			t.Fatal("an answer taken apart must serve")
		}
		// Served to a client of the smallest buffer: whole records that
		// fit, or none with TC.
		q.edns, q.udpSize = false, minUDPSize
		out := serve(a, &q, a.wire, 0, nil, q.udpSize)
		if _, err := walkRRs(nil, out); err != nil || binary.BigEndian.Uint16(out) != 7 {
			t.Fatalf("served answer does not walk (%v) or has another id", err)
		}
		if len(out) > max(minUDPSize, a.qEnd) {
			t.Fatalf("%d bytes served to a client of %d", len(out), minUDPSize)
		}
	})
}

// udpRoundTrip sends pkt to server over UDP and returns the reply.
func udpRoundTrip(t *testing.T, server string, pkt []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
