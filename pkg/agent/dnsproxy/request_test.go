package dnsproxy

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseRequest(t *testing.T) {
	q := rawQuery(t, "Reviews.Default.", dns.TypeAAAA, nil)
	twice := append(append([]byte(nil), q[:len(q)-4]...), 0, 1, 0, 1)
	binary.BigEndian.PutUint16(twice[4:], 2)
	twice = append(twice, 0xC0, 12, 0, 16, 0, 1) // the second question points at the first's name
	for _, tc := range []struct {
		name    string
		pkt     []byte
		qd      int
		key     string // the question's name, dotted
		edns    bool
		do      bool
		size    int
		version uint8
		err     string
	}{
		{name: "plain", pkt: q, qd: 1, key: "reviews.default.", size: 512},
		{name: "edns", pkt: rawQuery(t, "a.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(4096, true) }), qd: 1, key: "a.", edns: true, do: true, size: 4096},
		{name: "edns-tiny-buffer", pkt: rawQuery(t, "a.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(100, false) }), qd: 1, key: "a.", edns: true, size: 512},
		{name: "edns-version", pkt: rawQuery(t, "a.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.Extra[0].(*dns.OPT).SetVersion(1) }), qd: 1, key: "a.", edns: true, size: 1232, version: 1},
		{name: "two-questions-compressed", pkt: twice, qd: 2, key: "reviews.default.", size: 512},
		{name: "two-opt", pkt: rawQuery(t, "a.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.Extra = append(m.Extra, m.Extra[0]) }), err: "more than one OPT"},
		{name: "opt-option-cut", pkt: optWithData(t, []byte{0, 10, 0, 8, 1, 2}), err: "malformed EDNS0 options"},
		{name: "pointer-forward-past-end", pkt: append(q[:12:12], 0xC0, 200, 0, 1, 0, 1), err: "too short"},
		{name: "pointer-loop", pkt: append(q[:12:12], 0xC0, 12, 0, 1, 0, 1), err: "too many compression pointers"},
		{name: "label-type-0x40", pkt: append(q[:12:12], 0x41, 'a', 0, 0, 1, 0, 1), err: "reserved label type"},
		{name: "short-header", pkt: q[:5], err: "shorter than its header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseRequest(tc.pkt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.qd != tc.qd || wireName(r.q.key[:len(r.q.key)-2]) != tc.key || r.q.edns != tc.edns || r.q.do != tc.do ||
				r.q.udpSize != tc.size || r.version != tc.version {
				t.Fatalf("got qd %d key %q edns %v do %v size %d version %d", r.qd, wireName(r.q.key[:len(r.q.key)-2]), r.q.edns, r.q.do, r.q.udpSize, r.version)
			}
			// The rebuilt packet is what a client could have sent: it
			// unpacks with the same questions, names uncompressed.
			var got, want dns.Msg
			if err := got.Unpack(r.pkt); err != nil {
				t.Fatal(err)
			}
			if err := want.Unpack(tc.pkt); err != nil {
				t.Fatal(err)
			}
			if got.Id != want.Id || got.MsgHdr != want.MsgHdr || len(got.Question) != len(want.Question) {
				t.Fatalf("rebuilt packet %v, want the questions of %v", &got, &want)
			}
			for i := range got.Question {
				if got.Question[i] != want.Question[i] {
					t.Fatalf("question %d: %v, want %v", i, got.Question[i], want.Question[i])
				}
			}
			if r.q.qEnd != len(r.pkt) {
				t.Fatalf("qEnd %d, want the end of the questions %d", r.q.qEnd, len(r.pkt))
			}
		})
	}
}

// optWithData is a query whose OPT record holds data as its options.
func optWithData(t *testing.T, data []byte) []byte {
	b := rawQuery(t, "a.", dns.TypeA, nil)
	binary.BigEndian.PutUint16(b[10:], 1)
	b = append(b, 0, 0, typeOPT, 0x04, 0xd0, 0, 0, 0, 0, byte(len(data)>>8), byte(len(data)))
	return append(b, data...)
}

// FuzzParseRequest holds parseRequest to miekg/dns, the parser of Istio's
// agent: whatever miekg/dns takes whole (every record the header counts)
// parseRequest takes too, with the same questions and EDNS0 facts, except
// for a second OPT record, which RFC 6891 makes a format error, and a last
// question cut short of its type or class, which miekg/dns reads as 0.
// parseRequest may take more: it does not look inside records' data.
func FuzzParseRequest(f *testing.F) {
	for _, tc := range badPackets(f) {
		f.Add(tc.pkt)
	}
	f.Add(rawQuery(f, "a.B.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }))
	f.Add(rawQuery(f, "a.", dns.TypeTXT, func(m *dns.Msg) {
		m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: []byte{1, 2, 3, 4}})
		m.SetEdns0(4096, false)
		m.Compress = true
	}))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		r, err := parseRequest(pkt)
		var m dns.Msg
		merr := m.Unpack(pkt)
		whole := merr == nil && countsMatch(pkt, &m)
		if err != nil {
			cut := errors.Is(err, errShortMsg) && strings.HasPrefix(err.Error(), "question") && len(m.Question) > 0 && m.Question[len(m.Question)-1].Qclass == 0
			if whole && !cut && !errors.Is(err, errNoQuery) && !strings.Contains(err.Error(), "more than one OPT") {
				t.Fatalf("parseRequest: %v; miekg/dns took it: %v", err, &m)
			}
			return
		}
		if !whole {
			return
		}
		if r.qd != len(m.Question) {
			t.Fatalf("%d questions, miekg/dns %d", r.qd, len(m.Question))
		}
		var rebuilt dns.Msg
		if err := rebuilt.Unpack(r.pkt); err != nil {
			t.Fatalf("rebuilt packet: %v", err)
		}
		for i, q := range m.Question {
			if rebuilt.Question[i] != q {
				t.Fatalf("question %d: %v, miekg/dns %v", i, rebuilt.Question[i], q)
			}
		}
		if r.qd > 0 {
			want, err := nameKeyOf(m.Question[0])
			if err == nil && string(r.q.key) != want {
				t.Fatalf("key %q, miekg/dns's question gives %q", r.q.key, want)
			}
		}
		opt := m.IsEdns0()
		if r.q.edns != (opt != nil) {
			t.Fatalf("edns %v, miekg/dns %v", r.q.edns, opt != nil)
		}
		if opt != nil && (r.q.do != opt.Do() || r.version != opt.Version() || r.q.udpSize != max(int(opt.UDPSize()), minUDPSize)) {
			t.Fatalf("do %v version %d size %d, miekg/dns %v", r.q.do, r.version, r.q.udpSize, opt)
		}
	})
}

// nameKeyOf is the lookup key of a question miekg/dns unpacked.
func nameKeyOf(q dns.Question) (string, error) {
	buf := make([]byte, maxNameLen+2)
	n, err := dns.PackDomainName(q.Name, buf, 0, nil, false)
	if err != nil {
		return "", err
	}
	return string(lowerKey(buf[:n], q.Qtype)), nil
}

// countsMatch reports whether the section counts in the header of msg
// match what miekg/dns unpacked into m (it forgives missing records).
func countsMatch(msg []byte, m *dns.Msg) bool {
	return int(binary.BigEndian.Uint16(msg[4:])) == len(m.Question) &&
		int(binary.BigEndian.Uint16(msg[6:])) == len(m.Answer) &&
		int(binary.BigEndian.Uint16(msg[8:])) == len(m.Ns) &&
		int(binary.BigEndian.Uint16(msg[10:])) == len(m.Extra)
}
