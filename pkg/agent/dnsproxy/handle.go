package dnsproxy

import (
	"context"
	"encoding/binary"
	"time"
)

// source says where an answer came from, for metrics.
type source uint8

const (
	srcNone source = iota
	srcMesh
	srcCache
)

// fast answers msg from a precomputed message when it can, appending the
// response to out. It returns nil when the slow path must answer. keyBuf
// is scratch space for the lookup key, reused across calls.
func (s *Server) fast(msg, out []byte, keyBuf *[]byte, tcp bool) ([]byte, source) {
	q, ok := parseQuery(msg, *keyBuf)
	*keyBuf = q.key[:0]
	if !ok || q.qclass != classINET {
		return nil, srcNone
	}
	limit := q.udpSize
	if tcp {
		limit = maxMsgSize
	}
	if t := s.table.Load(); t != nil {
		if a, target := t.lookup(q.key); target != nil {
			return a.appendAliasTo(out, &q, msg, target, limit), srcMesh
		} else if a != nil {
			return a.appendTo(out, &q, msg, 0, limit), srcMesh
		}
	}
	if s.cache != nil {
		key := append(q.key, q.cacheFlags())
		*keyBuf = key[:0]
		now := s.now()
		if a := s.cache.get(key, now); a != nil {
			return a.appendTo(out, &q, msg, now-a.stored(), limit), srcCache
		}
	}
	return nil, srcNone
}

// slow answers any packet, forwarding upstream when needed, and returns
// the response or nil to drop the packet. It may block for up to the
// forwarding timeout.
func (s *Server) slow(ctx context.Context, msg []byte, tcp bool) []byte {
	r, err := parseRequest(msg)
	if err != nil {
		s.m.malformed.Inc()
		return formErr(msg)
	}
	q := &r.q
	if q.flags&flagQR != 0 {
		s.m.malformed.Inc()
		return nil
	}
	limit := q.udpSize
	if tcp {
		limit = maxMsgSize
	}
	switch {
	case q.flags&flagOpcode != 0:
		return serve(rcodeAnswer(q, r.pkt, rcodeNotImplemented), q, r.pkt, 0, nil, limit)
	case r.qd != 1:
		s.m.malformed.Inc()
		return serve(rcodeAnswer(q, r.pkt, rcodeFormatError), q, r.pkt, 0, nil, limit)
	case q.edns && r.version != 0:
		out := serve(rcodeAnswer(q, r.pkt, rcodeBadVers), q, r.pkt, 0, nil, limit)
		out[len(out)-6] = rcodeBadVers >> 4 // the OPT record's extended rcode
		return out
	}
	a, target, age := s.resolve(ctx, q, r.pkt)
	return serve(a, q, r.pkt, age, target, limit)
}

// serve writes a's answer to q (whose packet is pkt), aged by age; with a
// target, as the answer to an alias of target (appendAliasTo). What does
// not fit in limit bytes is truncated.
func serve(a *answer, q *query, pkt []byte, age time.Duration, target []byte, limit int) []byte {
	var out []byte
	if target != nil {
		out = a.appendAliasTo(nil, q, pkt, target, limit)
	} else {
		out = a.appendTo(nil, q, pkt, age, limit)
	}
	if out == nil {
		out = a.appendTruncated(nil, q, pkt, age, target, limit)
	}
	if out == nil { // cannot happen: every answer serves its own question
		out = rcodeAnswer(q, pkt, rcodeServerFailure).appendTo(nil, q, pkt, 0, maxMsgSize)
	}
	return out
}

// resolve returns the answer to q (whose packet is pkt) from the mesh
// table, the cache or an upstream: the answer, the target when it is
// served as an alias, and its age.
func (s *Server) resolve(ctx context.Context, q *query, pkt []byte) (*answer, []byte, time.Duration) {
	if q.qclass == classINET {
		if t := s.table.Load(); t != nil {
			if a, target := t.lookup(q.key); a != nil {
				s.m.mesh.Inc()
				return a, target, 0
			}
			if a, target := t.wildcardAnswer(q); a != nil {
				s.m.mesh.Inc()
				return a, target, 0
			}
		}
	}
	switch q.qtype {
	case typeAXFR, typeIXFR:
		return rcodeAnswer(q, pkt, rcodeNotImplemented), nil, 0
	}
	if q.qclass == classINET {
		key := append(q.key, q.cacheFlags())
		now := s.now()
		if a := s.cache.get(key, now); a != nil {
			s.m.cacheHits.Inc()
			return a, nil, now - a.stored()
		}
	}
	a, err := s.forwardQuery(ctx, q)
	if err != nil {
		s.log.Debug("forwarding failed", "key", string(q.key), "class", q.qclass, "err", err)
		return rcodeAnswer(q, pkt, rcodeServerFailure), nil, 0
	}
	return a, nil, 0
}

// wildcardAnswer answers an A or AAAA question q for a name covered by a
// wildcard host, or for such a name with the first search domain appended
// (as an alias of the name without it: appendAliasTo's target).
func (t *table) wildcardAnswer(q *query) (*answer, []byte) {
	if len(t.wildcards) == 0 || (q.qtype != typeA && q.qtype != typeAAAA) {
		return nil, nil
	}
	name := q.key[:len(q.key)-2]
	var target []byte
	rec := t.wildcard(wireName(name))
	if rec == nil && len(t.search0Wire) > 0 {
		cut := len(name) - len(t.search0Wire)
		if cut > 0 && string(name[cut:]) == string(t.search0Wire) && labelStart(name, cut) {
			target = name[:cut:cut]
			rec = t.wildcard(wireName(target))
		}
	}
	if rec == nil {
		return nil, nil
	}
	i := 0
	if q.qtype == typeAAAA {
		i = 1
	}
	return rec.plain[i], target
}

// formErr answers a packet that does not parse with FORMERR, echoing its
// ID and opcode, or returns nil when it is not a query at all.
func formErr(msg []byte) []byte {
	if len(msg) < headerLen || msg[2]&0x80 != 0 {
		return nil
	}
	out := make([]byte, headerLen)
	copy(out, msg[:2])
	flags := binary.BigEndian.Uint16(msg[2:])&(flagOpcode|flagRD) | flagQR | flagRA | rcodeFormatError
	binary.BigEndian.PutUint16(out[2:], flags)
	return out
}
