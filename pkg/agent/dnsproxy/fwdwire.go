package dnsproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"time"
)

// The forward path of plain UDP queries, in wire form. A query the fast
// path parses but cannot answer (not a mesh name, not cached) is sent
// upstream as a message written here, and the upstream's answer is never
// unpacked: its records are located, the cache keeps them when their TTL
// allows, and the reply is the client's header and question over the
// upstream's records, as cached answers are served. The slow path forwards
// the same way (forwardQuery) for the queries it takes apart itself.

// flightWire prefixes the coalescing keys of forwarded questions, whose
// shared value is an *answer.
const flightWire = "w"

// forwardUDP answers pkt, a UDP query, by forwarding it in wire form, or
// returns nil when the slow path must answer it. The event path
// (forwardEvent) takes most such queries; this one serves the rest
// (parallel forwarding).
func (s *Server) forwardUDP(ctx context.Context, pkt []byte) []byte {
	var kb [maxNameLen + 3]byte
	q, ok := s.wireForwardable(pkt, kb[:0])
	if !ok {
		return nil
	}
	a, err := s.forwardQuery(ctx, &q)
	return s.wireReply(&q, pkt, a, err)
}

// forwardQuery forwards q upstream, coalesced with the same question in
// flight, and returns the answer to serve, cached when its TTLs allow
// (class IN only: the cache's keys have no class).
func (s *Server) forwardQuery(ctx context.Context, q *query) (*answer, error) {
	ckey := append(q.key, q.cacheFlags())
	fkey := flightWire + string(ckey)
	if q.qclass != classINET {
		fkey += string(binary.BigEndian.AppendUint16(nil, q.qclass))
	} else if s.cache != nil {
		s.m.cacheMisses.Inc()
	}
	v, err, _ := s.fwd.flight.Do(fkey, func() (any, error) {
		size := uint16(ourUDPSize)
		if q.edns {
			size = uint16(min(max(q.udpSize, ourUDPSize), maxUDPSize))
		}
		packed := upstreamWire(q.key[:len(q.key)-2], q.qtype, q.qclass, q.flags, q.do, size)
		wire, err := s.fwd.forward(ctx, packed)
		if err != nil {
			return nil, err
		}
		if q.qclass != classINET {
			a, _ := upstreamAnswer(wire)
			return a, nil
		}
		return s.keepWire(string(ckey), wire), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*answer), nil
}

// wireForwardable parses pkt for the wire forward path, with its key in
// keyBuf. ok is false when the table may answer it or the slow path must.
func (s *Server) wireForwardable(pkt, keyBuf []byte) (q query, ok bool) {
	q, ok = parseQuery(pkt, keyBuf)
	if !ok || q.qclass != classINET || q.qtype == typeAXFR || q.qtype == typeIXFR {
		return q, false
	}
	if t := s.table.Load(); t != nil {
		if a, _ := t.lookup(q.key); a != nil {
			return q, false // the table answers
		}
		if a, _ := t.wildcardAnswer(&q); a != nil {
			return q, false // a wildcard host answers
		}
	}
	return q, true
}

// keepWire makes a servable answer of the upstream answer wire to the
// query with cache key ckey (upstreamAnswer), and caches it when its TTL
// allows.
func (s *Server) keepWire(ckey string, wire []byte) *answer {
	a, ttl := upstreamAnswer(wire)
	if ttl > 0 {
		s.cache.putAnswer([]byte(ckey), a, ttl, s.now())
	}
	return a
}

// wireReply is the reply to q (whose packet is pkt) when forwarding gave
// the answer a, or err.
func (s *Server) wireReply(q *query, pkt []byte, a *answer, err error) []byte {
	if err != nil {
		s.log.Debug("forwarding failed", "key", string(q.key), "err", err)
		a = rcodeAnswer(q, pkt, rcodeServerFailure)
	}
	return serve(a, q, pkt, 0, nil, q.udpSize)
}

// wireName is the dotted form ("a.b.") of an uncompressed wire name.
func wireName(w []byte) string {
	var b strings.Builder
	b.Grow(len(w))
	for off := 0; off < len(w) && w[off] != 0; off += 1 + int(w[off]) {
		b.Write(w[off+1 : off+1+int(w[off])])
		b.WriteByte('.')
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

// upstreamWire writes the upstream query for the lower-case wire name
// name: a random ID, the client's RD and CD bits, and EDNS0 with size and
// the client's DO bit.
func upstreamWire(name []byte, qtype, qclass, clientFlags uint16, do bool, size uint16) []byte {
	return appendUpstreamWire(make([]byte, 0, headerLen+len(name)+4+11), name, qtype, qclass, clientFlags, do, size)
}

// appendUpstreamWire is upstreamWire appended to b.
func appendUpstreamWire(b, name []byte, qtype, qclass, clientFlags uint16, do bool, size uint16) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	h := b[start:]
	binary.BigEndian.PutUint16(h, randomID())
	binary.BigEndian.PutUint16(h[2:], clientFlags&(flagRD|flagCD))
	binary.BigEndian.PutUint16(h[4:], 1)
	binary.BigEndian.PutUint16(h[10:], 1)
	b = append(b, name...)
	b = append(b, byte(qtype>>8), byte(qtype), byte(qclass>>8), byte(qclass))
	var doByte byte
	if do {
		doByte = optDOBit >> 8
	}
	return append(b, 0, 0, typeOPT, byte(size>>8), byte(size), 0, 0, doByte, 0, 0, 0)
}

// upstreamAnswer is what the proxy serves for an upstream's answer wire,
// and how long it may be cached: answerFromWire's answer; for an error
// without a question, that error; for an answer that code does not take
// apart (a compressed question, an OPT record not last, an extended
// rcode: none seen from real servers), SERVFAIL.
func upstreamAnswer(wire []byte) (*answer, time.Duration) {
	if a, ttl, ok := answerFromWire(wire); ok {
		return a, ttl
	}
	rcode := uint16(rcodeServerFailure)
	if len(wire) >= headerLen && binary.BigEndian.Uint16(wire[4:]) == 0 && wire[3]&rcodeMax != 0 {
		rcode = uint16(wire[3] & rcodeMax)
	}
	// No records and any question: served as the client asked it.
	out := make([]byte, headerLen)
	binary.BigEndian.PutUint16(out[2:], flagQR|flagRA|rcode)
	binary.BigEndian.PutUint16(out[4:], 1)
	return &answer{wire: out, qEnd: headerLen, anyName: true}, 0
}

// answerFromWire makes a servable answer of an upstream answer: ID 0, not
// authoritative, recursion available, the question in lower case, without
// the upstream's OPT record, every TTL located for aging. ttl is how long
// it may be cached (never when truncated). ok is false for an answer it
// does not take apart (no question or a compressed one, an OPT record not
// last, an extended rcode).
func answerFromWire(wire []byte) (a *answer, ttl time.Duration, ok bool) {
	a = new(answer)
	if ttl, ok = a.fromWire(nil, wire); !ok {
		return nil, 0, false
	}
	return a, ttl, true
}

// fromWire is answerFromWire into a, whose wire is written to buf[:0] and
// whose TTL slices are reused: the event path serves uncacheable answers
// from a scratch answer this way, without allocating.
func (a *answer) fromWire(buf, wire []byte) (ttl time.Duration, ok bool) {
	if len(wire) < headerLen {
		return 0, false
	}
	flags := binary.BigEndian.Uint16(wire[2:])
	if flags&flagQR == 0 || binary.BigEndian.Uint16(wire[4:]) != 1 {
		return 0, false
	}
	qEnd, ok := plainName(wire, headerLen)
	if !ok || qEnd+4 > len(wire) {
		return 0, false
	}
	qEnd += 4
	var spanBuf [16]rrSpan
	spans, err := walkRRs(spanBuf[:0], wire)
	if err != nil {
		return 0, false
	}
	an := int(binary.BigEndian.Uint16(wire[6:]))
	ns := int(binary.BigEndian.Uint16(wire[8:]))
	end := qEnd
	if len(spans) > 0 {
		end = spans[len(spans)-1].end
	}
	optDropped := false
	for i, sp := range spans {
		if i < an+ns || !isOPT(wire, sp) {
			continue
		}
		if i != len(spans)-1 || wire[sp.ttlOff] != 0 { // not last, or an extended rcode
			return 0, false
		}
		end, optDropped = sp.start, true
		spans = spans[:i]
	}
	out := append(buf[:0], wire[:end]...)
	binary.BigEndian.PutUint16(out, 0)
	binary.BigEndian.PutUint16(out[2:], flags&^flagAA|flagRA)
	if optDropped {
		binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])-1)
	}
	for i := headerLen; i < qEnd-4; i++ {
		if c := out[i]; 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	a.wire, a.qEnd, a.anyName = out, qEnd, false
	a.rotOff, a.rotN, a.rotSize = 0, 0, 0
	if a.age == nil {
		a.age = &aging{}
	}
	a.age.ttls, a.age.stored = a.age.ttls[:0], 0
	for _, sp := range spans {
		a.age.ttls = append(a.age.ttls, ttlAt{int32(sp.ttlOff), binary.BigEndian.Uint32(out[sp.ttlOff:])})
	}
	if flags&flagTC != 0 {
		return 0, true
	}
	return wireTTL(out, spans, an, ns, a.age.ttls), true
}

// clone is a copy of a that owns its memory, for the cache.
func (a *answer) clone() *answer {
	c := &answer{wire: bytes.Clone(a.wire), qEnd: a.qEnd}
	if a.age != nil {
		c.age = &aging{ttls: slices.Clone(a.age.ttls), stored: a.age.stored}
	}
	return c
}

// plainName returns the offset past the uncompressed name at off.
func plainName(msg []byte, off int) (int, bool) {
	for off < len(msg) {
		l := int(msg[off])
		if l == 0 {
			return off + 1, true
		}
		if l&0xC0 != 0 {
			return 0, false
		}
		off += 1 + l
	}
	return 0, false
}

// wireTTL is how long an answer in wire form may be cached: the smallest
// TTL of a positive answer; for NXDOMAIN and NODATA the SOA's TTL capped by
// its MINIMUM (RFC 2308 section 5); otherwise 0 (not cached).
func wireTTL(wire []byte, spans []rrSpan, an, ns int, ttls []ttlAt) time.Duration {
	rcode := int(binary.BigEndian.Uint16(wire[2:]) & rcodeMax)
	if rcode != rcodeSuccess && rcode != rcodeNameError {
		return 0
	}
	if rcode == rcodeSuccess && an > 0 {
		ttl := ^uint32(0)
		for _, t := range ttls {
			ttl = min(ttl, t.ttl)
		}
		return time.Duration(ttl) * time.Second
	}
	for i := an; i < an+ns && i < len(spans); i++ {
		sp := spans[i]
		if binary.BigEndian.Uint16(wire[sp.ttlOff-4:]) == typeSOA && sp.end-4 >= sp.ttlOff+6 {
			ttl := min(ttls[i].ttl, binary.BigEndian.Uint32(wire[sp.end-4:]))
			return time.Duration(ttl) * time.Second
		}
	}
	return 0
}
