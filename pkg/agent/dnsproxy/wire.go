package dnsproxy

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Header flag bits of a DNS message (RFC 1035 4.1.1, RFC 4035 3.2).
const (
	flagQR     = 0x8000
	flagOpcode = 0x7800
	flagAA     = 0x0400
	flagTC     = 0x0200
	flagRD     = 0x0100
	flagRA     = 0x0080
	flagAD     = 0x0020
	flagCD     = 0x0010

	headerLen  = 12
	classINET  = 1
	optDOBit   = 0x8000 // in the flags half of the OPT TTL
	maxNameLen = 255

	// maxMsgSize is the largest DNS message (over TCP).
	maxMsgSize = 65535

	// minUDPSize is what a client without EDNS0 can receive (RFC 1035).
	minUDPSize = 512
	// ourUDPSize is the EDNS0 buffer size this server advertises: the
	// DNS flag day 2020 value, which avoids IP fragmentation.
	ourUDPSize = 1232
	// maxUDPSize caps buffer sizes we ask upstreams for.
	maxUDPSize = 4096
	// maxQuerySize is the largest query read from a client over UDP. Real
	// queries are far smaller; Istio's agent reads them into 512 bytes
	// (miekg/dns's default), so this is a superset of what it takes.
	maxQuerySize = ourUDPSize
)

// Record types (RFC 1035 3.2.2 and later) the proxy tells apart.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typePTR   = 12
	typeMX    = 15
	typeTXT   = 16
	typeAAAA  = 28
	typeSRV   = 33
	typeOPT   = 41
	typeIXFR  = 251
	typeAXFR  = 252
)

// Response codes (RFC 1035 4.1.1, RFC 6891 9).
const (
	rcodeSuccess        = 0
	rcodeFormatError    = 1
	rcodeServerFailure  = 2
	rcodeNameError      = 3
	rcodeNotImplemented = 4
	rcodeRefused        = 5
	rcodeBadVers        = 16 // extended: 1 in the OPT record, 0 in the header
	rcodeMax            = 0x0f
)

// rcodeName is the mnemonic of the response codes that make an upstream
// try the next one, for metrics.
var rcodeName = map[int]string{
	rcodeFormatError:    "FORMERR",
	rcodeServerFailure:  "SERVFAIL",
	rcodeNotImplemented: "NOTIMP",
	rcodeRefused:        "REFUSED",
}

// query is a DNS query parsed just far enough to answer it from a
// precomputed message. Anything unusual fails parseQuery and takes the slow
// path, which takes the whole message apart (parseRequest).
type query struct {
	id      uint16
	flags   uint16
	qEnd    int // offset just past the question section
	qtype   uint16
	qclass  uint16
	key     []byte // lowercased wire name + qtype, in the caller's buffer
	edns    bool
	do      bool
	udpSize int // what the client can receive over UDP
}

// withoutKey is q with no key, built field by field so that a kept copy
// does not hold (or make the compiler move to the heap) the key's buffer.
func (q query) withoutKey() query {
	return query{id: q.id, flags: q.flags, qEnd: q.qEnd, qtype: q.qtype, qclass: q.qclass,
		edns: q.edns, do: q.do, udpSize: q.udpSize}
}

// parseQuery parses msg as a plain query: one question with an
// uncompressed name, at most an EDNS0 version 0 OPT record, nothing else.
// key is appended to keyBuf[:0]. ok is false when the slow path must
// decide.
func parseQuery(msg, keyBuf []byte) (q query, ok bool) {
	if len(msg) < headerLen {
		return q, false
	}
	q.id = binary.BigEndian.Uint16(msg)
	q.flags = binary.BigEndian.Uint16(msg[2:])
	if q.flags&(flagQR|flagOpcode|flagTC) != 0 {
		return q, false
	}
	qd := binary.BigEndian.Uint16(msg[4:])
	an := binary.BigEndian.Uint16(msg[6:])
	ns := binary.BigEndian.Uint16(msg[8:])
	ar := binary.BigEndian.Uint16(msg[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return q, false
	}
	off := headerLen
	key := keyBuf[:0]
	for {
		if off >= len(msg) {
			return q, false
		}
		l := int(msg[off])
		if l&0xC0 != 0 { // compression pointer or reserved label type
			return q, false
		}
		if off+1+l > len(msg) || off+1+l-headerLen > maxNameLen {
			return q, false
		}
		key = append(key, msg[off])
		for _, c := range msg[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			key = append(key, c)
		}
		off += 1 + l
		if l == 0 {
			break
		}
	}
	if off+4 > len(msg) {
		return q, false
	}
	q.qtype = binary.BigEndian.Uint16(msg[off:])
	q.qclass = binary.BigEndian.Uint16(msg[off+2:])
	off += 4
	q.qEnd = off
	q.key = append(key, byte(q.qtype>>8), byte(q.qtype))
	q.udpSize = minUDPSize
	if ar == 1 {
		// OPT: root name, type 41, class = UDP size, TTL = ext-rcode,
		// version, flags; then RDLENGTH and options we ignore.
		if off+11 > len(msg) || msg[off] != 0 || binary.BigEndian.Uint16(msg[off+1:]) != typeOPT {
			return q, false
		}
		size := int(binary.BigEndian.Uint16(msg[off+3:]))
		if msg[off+5] != 0 || msg[off+6] != 0 { // extended rcode, version
			return q, false
		}
		q.do = binary.BigEndian.Uint16(msg[off+7:])&optDOBit != 0
		rdlen := int(binary.BigEndian.Uint16(msg[off+9:]))
		if off+11+rdlen > len(msg) || !plainOptions(msg[off+11:off+11+rdlen]) {
			return q, false
		}
		off += 11 + rdlen
		q.edns = true
		q.udpSize = max(size, minUDPSize)
	}
	if off != len(msg) {
		return q, false
	}
	return q, true
}

// plainOptions reports whether the OPT record's options are well formed
// and only ones that need no look inside (COOKIE, PADDING): any other goes
// to the slow path.
func plainOptions(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if 4+n > len(b) || (code != optCookie && code != optPadding) {
			return false
		}
		b = b[4+n:]
	}
	return true
}

// EDNS0 option codes the fast path passes over (RFC 7873, RFC 7830).
const (
	optCookie  = 10
	optPadding = 12
)

// cacheFlags is the byte that distinguishes cached answers by the query
// bits that change an upstream's answer (DNSSEC OK, checking disabled).
func (q *query) cacheFlags() byte {
	var b byte
	if q.do {
		b |= 1
	}
	if q.flags&flagCD != 0 {
		b |= 2
	}
	return b
}

// errShortMsg is returned by walkRRs for a message that ends too early.
var errShortMsg = errors.New("dns message too short")

// skipName returns the offset just past the (possibly compressed) name at off.
func skipName(msg []byte, off int) (int, error) {
	for {
		if off >= len(msg) {
			return 0, errShortMsg
		}
		l := int(msg[off])
		switch {
		case l == 0:
			return off + 1, nil
		case l&0xC0 == 0xC0:
			if off+2 > len(msg) {
				return 0, errShortMsg
			}
			return off + 2, nil
		case l&0xC0 != 0:
			return 0, errors.New("reserved label type")
		}
		off += 1 + l
	}
}

// rrSpan locates one resource record in a packed message.
type rrSpan struct {
	start, ttlOff, end int
}

// walkRRs appends to dst the spans of every record after the question
// section of a packed message. It checks that every record is within msg,
// not what is inside. A caller on the hot path passes a stack array's
// slice.
func walkRRs(dst []rrSpan, msg []byte) ([]rrSpan, error) {
	if len(msg) < headerLen {
		return nil, errShortMsg
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	total := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:])) + int(binary.BigEndian.Uint16(msg[10:]))
	off := headerLen
	var err error
	for range qd {
		if off, err = skipName(msg, off); err != nil {
			return nil, err
		}
		if off += 4; off > len(msg) {
			return nil, errShortMsg
		}
	}
	spans := slices.Grow(dst, total)
	for range total {
		start := off
		if off, err = skipName(msg, off); err != nil {
			return nil, err
		}
		if off+10 > len(msg) {
			return nil, errShortMsg
		}
		ttlOff := off + 4
		end := off + 10 + int(binary.BigEndian.Uint16(msg[off+8:]))
		if end > len(msg) {
			return nil, errShortMsg
		}
		spans = append(spans, rrSpan{start, ttlOff, end})
		off = end
	}
	return spans, nil
}

// queryKey returns the ID and the question section of a packed query with
// one question, for matching its answer.
func queryKey(packed []byte) (uint16, []byte, error) {
	if len(packed) < headerLen || binary.BigEndian.Uint16(packed[4:]) != 1 {
		return 0, nil, errors.New("query: want one question")
	}
	end, err := skipName(packed, headerLen)
	if err != nil || end+4 > len(packed) {
		return 0, nil, errShortMsg
	}
	return binary.BigEndian.Uint16(packed), packed[headerLen : end+4], nil
}

// answersQuery reports whether resp is a response with id to the question
// (a query's question section): the same name, ignoring ASCII case, type
// and class. An error response may omit the question.
func answersQuery(resp []byte, id uint16, question []byte) bool {
	if len(resp) < headerLen || binary.BigEndian.Uint16(resp) != id || resp[2]&0x80 == 0 {
		return false
	}
	switch binary.BigEndian.Uint16(resp[4:]) {
	case 0:
		return resp[3]&0x0f != 0
	case 1:
	default:
		return false
	}
	if len(resp) < headerLen+len(question) {
		return false
	}
	got := resp[headerLen : headerLen+len(question)]
	nameLen := len(question) - 4
	for i := range nameLen {
		a, b := got[i], question[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return string(got[nameLen:]) == string(question[nameLen:])
}
