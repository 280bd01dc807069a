package dnsproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// request is a query taken apart in full, for the slow path: what the fast
// path declines (a compressed name, no or several questions, records
// besides one OPT, another opcode, EDNS options it does not pass over) is
// checked here record by record, and answered from a packet rebuilt in
// the plain form the fast path reads.
type request struct {
	// pkt is the query as the answer code reads it: the client's header
	// with its question count and no other records, then its questions
	// with their names uncompressed, in the client's spelling.
	pkt []byte
	// q is the first question as parseQuery makes it of pkt (its qEnd
	// past every question), with the EDNS0 facts of the whole message.
	q       query
	qd      int   // questions
	version uint8 // EDNS version, when q.edns
}

// errNoQuery is parseRequest's error for a message too short for a header.
var errNoQuery = errors.New("dns message shorter than its header")

// parseRequest takes msg apart: the header, every question (names may be
// compressed), and every record, whose names and lengths must lie within
// msg; an OPT record in the additional section gives the EDNS0 facts, and
// its options must be well formed. Bytes after the last record are
// ignored, as miekg/dns (Istio's agent) ignores them.
func parseRequest(msg []byte) (request, error) {
	var r request
	if len(msg) < headerLen {
		return r, errNoQuery
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	an := int(binary.BigEndian.Uint16(msg[6:]))
	ns := int(binary.BigEndian.Uint16(msg[8:]))
	ar := int(binary.BigEndian.Uint16(msg[10:]))
	pkt := make([]byte, headerLen, headerLen+min(len(msg), maxQuerySize))
	copy(pkt, msg[:4])
	binary.BigEndian.PutUint16(pkt[4:], uint16(qd))
	off := headerLen
	var err error
	for i := range qd {
		nameAt := len(pkt)
		if pkt, off, err = appendName(pkt, msg, off); err != nil {
			return r, fmt.Errorf("question %d: %w", i+1, err)
		}
		if off+4 > len(msg) {
			return r, fmt.Errorf("question %d: %w", i+1, errShortMsg)
		}
		pkt = append(pkt, msg[off:off+4]...)
		off += 4
		if i == 0 {
			r.q.qtype = binary.BigEndian.Uint16(msg[off-4:])
			r.q.qclass = binary.BigEndian.Uint16(msg[off-2:])
			r.q.key = lowerKey(pkt[nameAt:len(pkt)-4], r.q.qtype)
		}
	}
	var scratch [maxNameLen]byte
	opts := 0
	for i := range an + ns + ar {
		if _, off, err = appendName(scratch[:0], msg, off); err != nil {
			return r, fmt.Errorf("record %d: %w", i+1, err)
		}
		if off+10 > len(msg) {
			return r, fmt.Errorf("record %d: %w", i+1, errShortMsg)
		}
		rrtype := binary.BigEndian.Uint16(msg[off:])
		rdata := off + 10
		end := rdata + int(binary.BigEndian.Uint16(msg[off+8:]))
		if end > len(msg) {
			return r, fmt.Errorf("record %d: %w", i+1, errShortMsg)
		}
		if i >= an+ns && rrtype == typeOPT {
			// RFC 6891 6.1.1: more than one OPT record is a format error.
			if opts++; opts > 1 {
				return r, errors.New("more than one OPT record")
			}
			if !wellFormedOptions(msg[rdata:end]) {
				return r, errors.New("malformed EDNS0 options")
			}
			ttl := binary.BigEndian.Uint32(msg[off+4:])
			r.q.edns = true
			r.q.udpSize = max(int(binary.BigEndian.Uint16(msg[off+2:])), minUDPSize)
			r.version = uint8(ttl >> 16)
			r.q.do = ttl&optDOBit != 0
		}
		off = end
	}
	r.pkt, r.qd = pkt, qd
	r.q.id = binary.BigEndian.Uint16(msg)
	r.q.flags = binary.BigEndian.Uint16(msg[2:])
	r.q.qEnd = len(pkt) // every question: an error answer echoes them all
	if !r.q.edns {
		r.q.udpSize = minUDPSize
	}
	return r, nil
}

// appendName appends the name at off in msg to dst uncompressed, and
// returns where the name ends in msg. As miekg/dns: labels of 63 octets
// at most, 255 in all, and at most 126 compression pointers (which also
// ends any loop).
func appendName(dst, msg []byte, off int) ([]byte, int, error) {
	const maxPointers = (maxNameLen+1)/2 - 2
	next, pointers, budget := -1, 0, maxNameLen
	for {
		if off >= len(msg) {
			return nil, 0, errShortMsg
		}
		l := int(msg[off])
		switch l & 0xC0 {
		case 0x00:
			if l == 0 {
				if next < 0 {
					next = off + 1
				}
				return append(dst, 0), next, nil
			}
			if off+1+l > len(msg) {
				return nil, 0, errShortMsg
			}
			if budget -= l + 1; budget <= 0 {
				return nil, 0, errors.New("name longer than 255 octets")
			}
			dst = append(dst, msg[off:off+1+l]...)
			off += 1 + l
		case 0xC0:
			if off+1 >= len(msg) {
				return nil, 0, errShortMsg
			}
			if next < 0 {
				next = off + 2
			}
			if pointers++; pointers > maxPointers {
				return nil, 0, errors.New("too many compression pointers")
			}
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3fff)
		default:
			return nil, 0, fmt.Errorf("reserved label type %#x", l&0xC0)
		}
	}
}

// wellFormedOptions reports whether the OPT record's data is a list of
// whole options (code, length, value).
func wellFormedOptions(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 4 || 4+int(binary.BigEndian.Uint16(b[2:])) > len(b) {
			return false
		}
		b = b[4+int(binary.BigEndian.Uint16(b[2:])):]
	}
	return true
}

// lowerKey is the lookup key of a question: its wire name in lower case,
// then its type.
func lowerKey(name []byte, qtype uint16) []byte {
	key := make([]byte, len(name), len(name)+2)
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		key[i] = c
	}
	return append(key, byte(qtype>>8), byte(qtype))
}
