package dnsproxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
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
		limit = dns.MaxMsgSize
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
	req := new(dns.Msg)
	if err := req.Unpack(msg); err != nil || !countsMatch(msg, req) {
		s.m.malformed.Inc()
		return formErr(msg)
	}
	if req.Response {
		s.m.malformed.Inc()
		return nil
	}
	resp := new(dns.Msg)
	switch opt := req.IsEdns0(); {
	case req.Opcode != dns.OpcodeQuery:
		resp.SetRcode(req, dns.RcodeNotImplemented)
	case len(req.Question) != 1:
		s.m.malformed.Inc()
		resp.SetRcode(req, dns.RcodeFormatError)
	case opt != nil && opt.Version() != 0:
		resp.SetRcode(req, dns.RcodeBadVers)
	default:
		resp = s.resolve(ctx, req)
	}
	return s.finish(req, resp, tcp)
}

// resolve returns the answer to req's question, from the mesh table, the
// cache or an upstream. Its header and question are fixed up by finish.
func (s *Server) resolve(ctx context.Context, req *dns.Msg) *dns.Msg {
	q := req.Question[0]
	lq := q
	lq.Name = strings.ToLower(q.Name)
	key, err := nameKey(lq.Name, q.Qtype)
	if err != nil {
		s.m.malformed.Inc()
		return reply(req, dns.RcodeFormatError)
	}
	if q.Qclass == dns.ClassINET {
		if t := s.table.Load(); t != nil {
			if a, target := t.lookup([]byte(key)); a != nil {
				s.m.mesh.Inc()
				return a.msg(0, key, target)
			}
			if q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA {
				if m := s.wildcardAnswer(t, lq); m != nil {
					s.m.mesh.Inc()
					return m
				}
			}
		}
	}
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		return reply(req, dns.RcodeNotImplemented)
	}
	do, cd := false, req.CheckingDisabled
	size := uint16(ourUDPSize)
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
		size = min(max(opt.UDPSize(), size), maxUDPSize)
	}
	var flags byte
	if do {
		flags |= 1
	}
	if cd {
		flags |= 2
	}
	ckey := key + string(flags)
	cacheable := q.Qclass == dns.ClassINET
	if cacheable {
		now := s.now()
		if a := s.cache.get([]byte(ckey), now); a != nil {
			s.m.cacheHits.Inc()
			return a.msg(now-a.stored(), key, nil)
		}
		if s.cache != nil {
			s.m.cacheMisses.Inc()
		}
	}
	v, err, shared := s.fwd.flight.Do(ckey, func() (any, error) {
		packed, err := upstreamQuery(lq, req.RecursionDesired, cd, do, size).Pack()
		if err != nil {
			return nil, fmt.Errorf("pack upstream query: %w", err)
		}
		wire, err := s.fwd.forward(ctx, packed)
		if err != nil {
			return nil, err
		}
		r := new(dns.Msg)
		if err := r.Unpack(wire); err != nil {
			return nil, fmt.Errorf("unpack upstream answer: %w", err)
		}
		if cacheable {
			s.cache.put([]byte(ckey), r, s.now())
		}
		return r, nil
	})
	if err != nil {
		s.log.Debug("forwarding failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return reply(req, dns.RcodeServerFailure)
	}
	r := v.(*dns.Msg)
	if shared {
		r = r.Copy() // finish edits the answer: each coalesced query its own
	}
	r.Authoritative = false // we are not the authority, whatever the upstream was
	return r
}

// wildcardAnswer answers A or AAAA for a name covered by a wildcard host,
// or for such a name with the first search domain appended (as a CNAME).
func (s *Server) wildcardAnswer(t *table, q dns.Question) *dns.Msg {
	target := ""
	rec := t.wildcard(q.Name)
	if rec == nil && t.search0 != "" && strings.HasSuffix(q.Name, "."+t.search0) {
		prefix := strings.TrimSuffix(q.Name, t.search0)
		if rec = t.wildcard(prefix); rec != nil {
			target = prefix
		}
	}
	if rec == nil {
		return nil
	}
	m := meshMsg(q.Name, q.Qtype)
	owner := q.Name
	if target != "" {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: meshHdr(q.Name, dns.TypeCNAME), Target: target})
		owner = target
	}
	addrs := rec.v4
	if q.Qtype == dns.TypeAAAA {
		addrs = rec.v6
	}
	if n := len(addrs); n > 1 {
		k := int(s.wildRotate.Add(1)) % n
		addrs = append(addrs[k:len(addrs):len(addrs)], addrs[:k]...)
	}
	m.Answer = append(m.Answer, addrRRs(owner, addrs)...)
	return m
}

// finish turns resp into the wire answer to req: the client's ID, flags
// and question, an OPT record if the client sent one, truncated (with TC)
// to what the client can receive.
func (s *Server) finish(req, resp *dns.Msg, tcp bool) []byte {
	resp.Id, resp.Response, resp.Opcode = req.Id, true, req.Opcode
	resp.RecursionDesired, resp.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	resp.RecursionAvailable = true
	resp.Question = req.Question
	resp.Extra = withoutOPT(resp.Extra)
	limit := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		if !opt.Do() && !req.AuthenticatedData {
			resp.AuthenticatedData = false
		}
		resp.SetEdns0(ourUDPSize, opt.Do())
		limit = max(int(opt.UDPSize()), dns.MinMsgSize)
	} else if !req.AuthenticatedData {
		resp.AuthenticatedData = false
	}
	if tcp {
		limit = dns.MaxMsgSize
	}
	resp.Truncate(limit)
	wire, err := resp.Pack()
	if err != nil {
		s.log.Debug("packing answer failed", "err", err)
		fail := reply(req, dns.RcodeServerFailure)
		fail.Question = nil
		fail.Id = req.Id
		if wire, err = fail.Pack(); err != nil {
			return nil
		}
	}
	return wire
}

// msg renders the answer to the question key (a lookup key: the wire name
// in lower case and the type) as a message, aged by age; with a target, as
// the answer to an alias of target (appendAliasTo).
func (a *answer) msg(age time.Duration, key string, target []byte) *dns.Msg {
	pkt := make([]byte, headerLen, headerLen+len(key)+2)
	pkt = append(append(pkt, key...), 0, classINET)
	q := query{qEnd: len(pkt), do: true} // do: keep the AD bit; finish decides
	var wire []byte
	if target != nil {
		wire = a.appendAliasTo(nil, &q, pkt, target, dns.MaxMsgSize)
	} else {
		wire = a.appendTo(nil, &q, pkt, age, dns.MaxMsgSize)
	}
	m := new(dns.Msg)
	if wire == nil || m.Unpack(wire) != nil {
		// Cannot happen: wire was packed by miekg/dns. Fail the query, not the server.
		m = new(dns.Msg)
		m.Rcode = dns.RcodeServerFailure
	}
	return m
}

// countsMatch reports whether the section counts in the header of msg
// match what was unpacked into m (miekg/dns forgives missing records).
func countsMatch(msg []byte, m *dns.Msg) bool {
	return int(binary.BigEndian.Uint16(msg[4:])) == len(m.Question) &&
		int(binary.BigEndian.Uint16(msg[6:])) == len(m.Answer) &&
		int(binary.BigEndian.Uint16(msg[8:])) == len(m.Ns) &&
		int(binary.BigEndian.Uint16(msg[10:])) == len(m.Extra)
}

// reply starts a response to req with rcode.
func reply(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	return m
}

// formErr answers a packet that does not parse with FORMERR, echoing its
// ID and opcode, or returns nil when it is not a query at all.
func formErr(msg []byte) []byte {
	if len(msg) < headerLen || msg[2]&0x80 != 0 {
		return nil
	}
	out := make([]byte, headerLen)
	copy(out, msg[:2])
	flags := binary.BigEndian.Uint16(msg[2:])&(flagOpcode|flagRD) | flagQR | flagRA | dns.RcodeFormatError
	binary.BigEndian.PutUint16(out[2:], flags)
	return out
}
