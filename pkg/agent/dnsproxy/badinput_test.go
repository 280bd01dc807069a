package dnsproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// rawQuery packs a query for name/qtype with the miekg/dns packer.
func rawQuery(t testing.TB, name string, qtype uint16, edit func(*dns.Msg)) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	if edit != nil {
		edit(m)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// longNamePacket is a query for a name of more than 255 octets, packed by hand
// because miekg/dns refuses to pack it.
func longNamePacket() []byte {
	b := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for range 5 {
		b = append(b, 63)
		b = append(b, []byte(strings.Repeat("x", 63))...)
	}
	return append(b, 0, 0, 1, 0, 1)
}

// badPackets are malformed or unsupported queries and what each deserves:
// an rcode, or -1 for silence.
func badPackets(t testing.TB) []struct {
	name  string
	pkt   []byte
	rcode int
} {
	header := func(flags uint16, qd, an, ns, ar uint16) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint16(b, 0x1234)
		binary.BigEndian.PutUint16(b[2:], flags)
		binary.BigEndian.PutUint16(b[4:], qd)
		binary.BigEndian.PutUint16(b[6:], an)
		binary.BigEndian.PutUint16(b[8:], ns)
		binary.BigEndian.PutUint16(b[10:], ar)
		return b
	}
	q := rawQuery(t, "reviews.default.svc.cluster.local.", dns.TypeA, nil)
	return []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"empty", []byte{}, -1},
		{"short-header", []byte{1, 2, 3, 4, 5}, -1},
		{"zero-questions", header(0x0100, 0, 0, 0, 0), dns.RcodeFormatError},
		{"two-questions", append(header(0x0100, 2, 0, 0, 0), append(q[12:], q[12:]...)...), dns.RcodeFormatError},
		{"question-missing", header(0x0100, 1, 0, 0, 0), dns.RcodeFormatError},
		{"truncated-question", q[:len(q)-3], dns.RcodeFormatError},
		{"oversized-name", longNamePacket(), dns.RcodeFormatError},
		{"bad-label-type", append(header(0x0100, 1, 0, 0, 0), 0x40, 'a', 0, 0, 1, 0, 1), dns.RcodeFormatError},
		{"pointer-loop", append(header(0x0100, 1, 0, 0, 0), 0xC0, 12, 0, 1, 0, 1), dns.RcodeFormatError},
		{"counts-lie", append(header(0x0100, 1, 5, 5, 5), q[12:]...), dns.RcodeFormatError},
		{"response", rawQuery(t, "reviews.", dns.TypeA, func(m *dns.Msg) { m.Response = true }), -1},
		{"notify", rawQuery(t, "reviews.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), dns.RcodeNotImplemented},
		{"update", rawQuery(t, "reviews.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), dns.RcodeNotImplemented},
		{"edns-version-1", rawQuery(t, "reviews.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), dns.RcodeBadVers},
		{"axfr", rawQuery(t, "cluster.local.", dns.TypeAXFR, nil), dns.RcodeNotImplemented},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), dns.RcodeFormatError},
	}
}

func TestBadInputUDP(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	conn, err := net.Dial("udp", addr4(s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	for _, tc := range badPackets(t) {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conn.Write(tc.pkt); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := conn.Read(buf)
			if tc.rcode < 0 {
				if err == nil {
					t.Fatalf("want silence, got %d bytes", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("want rcode %s, got %v", dns.RcodeToString[tc.rcode], err)
			}
			checkRcode(t, tc.pkt, buf[:n], tc.rcode)
		})
	}
	// A query of up to 1232 bytes (EDNS padding) is answered; a larger
	// datagram is dropped (Istio's agent reads only 512 bytes of one).
	for size, answered := range map[int]bool{maxQuerySize: true, maxQuerySize + 1: false} {
		pkt := paddedQuery(t, size)
		if _, err := conn.Write(pkt); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := conn.Read(buf)
		if !answered {
			if err == nil {
				t.Errorf("a %d-byte query: want silence, got %d bytes", size, n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("a %d-byte query: %v", size, err)
		}
		checkRcode(t, pkt, buf[:n], dns.RcodeSuccess)
	}
	// Still serving.
	if r := ask(t, "udp", addr4(s), "reviews", dns.TypeA, 0); len(r.Answer) != 1 {
		t.Fatalf("after bad input: %v", r)
	}
}

// paddedQuery is an A query for reviews. padded with EDNS0 padding to size bytes.
func paddedQuery(t *testing.T, size int) []byte {
	t.Helper()
	base := len(rawQuery(t, "reviews.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) }))
	const optionHeader = 4
	pkt := rawQuery(t, "reviews.", dns.TypeA, func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, size-base-optionHeader)})
	})
	if len(pkt) != size {
		t.Fatalf("padded query is %d bytes, want %d", len(pkt), size)
	}
	return pkt
}

// checkRcode checks that b answers pkt with rcode want.
func checkRcode(t *testing.T, pkt, b []byte, want int) {
	t.Helper()
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	if id := binary.BigEndian.Uint16(pkt); r.Id != id || !r.Response || r.Rcode != want {
		t.Fatalf("want id %#x rcode %s, got %v", id, dns.RcodeToString[want], r)
	}
}

func TestBadInputTCP(t *testing.T) {
	cfg := testConfig()
	cfg.TCPIdleTimeout = 300 * time.Millisecond
	cfg.MaxTCPConns = 4
	s := startServer(t, cfg, nil)
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", addr4(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...) }
	readFrame := func(t *testing.T, c net.Conn) ([]byte, error) {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		_, err := io.ReadFull(c, b)
		return b, err
	}
	t.Run("bad-then-good-on-one-connection", func(t *testing.T) {
		c := dial(t)
		for _, tc := range badPackets(t) {
			if tc.rcode < 0 || len(tc.pkt) == 0 {
				continue
			}
			if _, err := c.Write(frame(tc.pkt)); err != nil {
				t.Fatal(err)
			}
			b, err := readFrame(t, c)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			checkRcode(t, tc.pkt, b, tc.rcode)
		}
		good := rawQuery(t, "reviews.default.svc.cluster.local.", dns.TypeA, nil)
		_, _ = c.Write(frame(good))
		b, err := readFrame(t, c)
		if err != nil {
			t.Fatal(err)
		}
		checkRcode(t, good, b, dns.RcodeSuccess)
	})
	t.Run("truncated-frame-is-closed-after-idle-timeout", func(t *testing.T) {
		c := dial(t)
		q := rawQuery(t, "reviews.", dns.TypeA, nil)
		_, _ = c.Write(frame(q)[:len(q)-4])
		if _, err := readFrame(t, c); !errors.Is(err, io.EOF) {
			t.Fatalf("want the server to close the connection, got %v", err)
		}
	})
	t.Run("truncated-frame-then-close", func(t *testing.T) {
		c := dial(t)
		_, _ = c.Write([]byte{0x01})
		_ = c.Close()
	})
	t.Run("zero-length-frame", func(t *testing.T) {
		c := dial(t)
		_, _ = c.Write([]byte{0, 0})
		if _, err := readFrame(t, c); !errors.Is(err, io.EOF) {
			t.Fatalf("want close, got %v", err)
		}
	})
	t.Run("connection-limit", func(t *testing.T) {
		var conns []net.Conn
		for range cfg.MaxTCPConns + 2 {
			conns = append(conns, dial(t))
		}
		closed := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				closed++
			} else if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("unexpected read result: %v", err)
			}
		}
		if closed < 2 {
			t.Errorf("%d connections over the limit were closed, want at least 2", closed)
		}
	})
	// Every connection goroutine ends; goleak checks the rest at exit.
	polltest.Until(t, "every client connection closed", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 0
	})
}
