package dnsproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"
)

// errAttemptTimeout ends an event-path try that got no answer in time.
var errAttemptTimeout = fmt.Errorf("no answer within the attempt timeout: %w", context.DeadlineExceeded)

// The event path: how most forwarded queries travel. A plain UDP query
// that the table and the cache do not answer is sent upstream by the
// socket reader that received it, and answered by the reader of the
// upstream socket its answer arrives on: no goroutine per query and no
// hand-off between goroutines. The upstream queries of one batch of client
// queries leave in one sendmmsg per socket, and the replies made of one
// batch of answers in one sendmmsg per listener. Identical questions in
// flight share one upstream query.
//
// Only the common case is finished here: a good UDP answer from the first
// upstream within the attempt timeout. Anything else (a timeout, a failure
// rcode, a truncated answer, an answer the wire path does not take apart,
// a reply too big for the client) is handed to a goroutine that finishes
// the query exactly as the forwarder would have: the other upstreams and
// attempts, TCP, the slow path.

// evClient is one client query waiting on a flight.
type evClient struct {
	l    *udpListener
	addr netip.AddrPort
	pkt  []byte // the client's query, owned by the flight
	q    query  // parsed from pkt; q.key is not kept
}

// evFlight is one upstream question of the event path and the client
// queries waiting for its answer: one allocation for the common query.
// Every field but clients and done is set before the flight is visible to
// an answer or to the sweeper.
type evFlight struct {
	srv      *Server
	w        waiter // on the upstream socket, w.flight == this flight
	key      string // the cache key: question and flags, in keyBuf
	packed   []byte // the upstream query
	u        *upstream
	start    time.Time
	deadline time.Time // the whole forward's
	attempt  time.Time // the first try's
	sock     *udpSock

	clients []evClient // guarded by Server.evMu
	done    bool       // guarded by Server.evMu: answered, timed out or closed

	one [1]evClient // clients' first backing array
	buf [256]byte   // packed and the first client's packet, when they fit
	// keyBuf holds key's bytes, so that a reused flight makes no string.
	// key is the flight table's key: the flight leaves the table before
	// it is reused (see flights), and nothing else keeps key.
	keyBuf [maxNameLen + 3]byte
}

// flights keeps the flights of queries answered on the event path for
// reuse: a flight is one allocation per forwarded query otherwise. Only a
// flight answered in evAnswer with every reply written there comes back:
// by then it has left the flight table (evTake) and its socket's waiters
// (deliver), the send batch holds a copy of its query, and no goroutine
// has it. A flight handed to a goroutine (a timeout, a failure, a reply too
// big) is left to the GC.
var flights = sync.Pool{New: func() any { return new(evFlight) }}

// recycle returns f to flights, holding no references.
func recycle(f *evFlight) {
	*f = evFlight{}
	flights.Put(f)
}

// forwardEvent starts forwarding the UDP query pkt from addr on l, to be
// answered by the upstream socket's reader; the send is added to sends.
// now is when pkt's batch was read. It reports false when the query must
// take the goroutine path instead.
func (s *Server) forwardEvent(l *udpListener, pkt []byte, addr netip.AddrPort, sends *sendBatch, now time.Time) bool {
	if s.cfg.ForwardParallel || len(s.fwd.ups) == 0 {
		return false
	}
	var kb [maxNameLen + 3]byte
	q, ok := s.wireForwardable(pkt, kb[:0])
	if !ok {
		return false
	}
	select {
	case s.inflight <- struct{}{}:
	default:
		s.m.dropped.Inc()
		return true
	}
	if s.cache != nil {
		s.m.cacheMisses.Inc()
	}
	ckey := append(q.key, q.cacheFlags())
	name := q.key[:len(q.key)-2]
	kept := q.withoutKey() // kept by the flight; kb, which the key is in, stays on the stack

	s.evMu.Lock()
	defer s.evMu.Unlock()
	if s.evClosed {
		<-s.inflight
		return false
	}
	if f := s.evFlights[string(ckey)]; f != nil {
		f.clients = append(f.clients, evClient{l: l, addr: addr, pkt: bytes.Clone(pkt), q: kept})
		return true
	}
	f := flights.Get().(*evFlight)
	*f = evFlight{srv: s, u: s.fwd.first(), start: now}
	if len(ckey) <= len(f.keyBuf) { // always: a name has at most 255 octets
		f.key = unsafe.String(&f.keyBuf[0], copy(f.keyBuf[:], ckey))
	} else {
		f.key = string(ckey)
	}
	f.w.flight = f
	size := uint16(ourUDPSize)
	if q.edns {
		size = uint16(min(max(q.udpSize, ourUDPSize), maxUDPSize))
	}
	f.packed = appendUpstreamWire(f.buf[:0], name, q.qtype, classINET, q.flags, q.do, size)
	c := evClient{l: l, addr: addr, q: kept}
	var rest []byte // what packed left of buf, if it fit there
	if n := len(f.packed); n < len(f.buf) {
		rest = f.buf[n:]
	}
	if len(pkt) <= len(rest) {
		c.pkt = rest[:copy(rest, pkt)]
	} else {
		c.pkt = bytes.Clone(pkt)
	}
	f.one[0] = c
	f.clients = f.one[:]
	f.deadline = s.fwd.deadline(now)
	if f.attempt = now.Add(s.fwd.attemptTimeout); f.deadline.Before(f.attempt) {
		f.attempt = f.deadline
	}
	sock, err := f.u.udp.registerFlight(&f.w, f.packed, sends.sock, now)
	if err != nil {
		f.done = true
		s.wg.Add(1)
		s.evHandoff(f, f.clients, &tried{u: f.u, err: err}, false)
		return true
	}
	f.sock = sock
	s.evFlights[f.key] = f
	s.evArmLocked()
	f.u.reqUDP.Inc()
	sends.add(sock, f.packed)
	return true
}

// evSweepEvery is how often flights past their attempt deadline are looked
// for: an eighth of the attempt timeout, within the overall deadline's
// margin for answering.
func (s *Server) evSweepEvery() time.Duration {
	return max(min(s.fwd.attemptTimeout/8, s.fwd.timeout/40), time.Millisecond)
}

// evArmLocked starts the sweeper if it is not running. s.evMu is held.
func (s *Server) evArmLocked() {
	if s.evSweeping {
		return
	}
	s.evSweeping = true
	if s.evTimer == nil {
		s.evTimer = time.AfterFunc(s.evSweepEvery(), s.evSweep)
	} else {
		s.evTimer.Reset(s.evSweepEvery())
	}
}

// evSweep gives up the first try of every flight past its attempt
// deadline, and runs again while flights wait: one timer for them all.
func (s *Server) evSweep() {
	now := time.Now()
	var expired []*evFlight
	s.evMu.Lock()
	for key, f := range s.evFlights {
		if now.Before(f.attempt) {
			continue
		}
		f.done = true
		delete(s.evFlights, key)
		s.wg.Add(1)
		expired = append(expired, f)
	}
	if len(s.evFlights) > 0 && !s.evClosed {
		s.evTimer.Reset(s.evSweepEvery())
	} else {
		s.evSweeping = false
	}
	s.evMu.Unlock()
	for _, f := range expired {
		f.sock.unregister(&f.w)
		s.evHandoff(f, f.clients, &tried{u: f.u, err: errAttemptTimeout}, false)
	}
}

// evTake ends f's wait, if nothing else ended it, and returns its clients.
// ok is false when f was already answered, timed out or closed. Ending a
// flight counts it in s.wg until evDone: Close waits for it.
func (s *Server) evTake(f *evFlight) (clients []evClient, ok bool) {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if f.done {
		return nil, false
	}
	f.done = true
	if s.evFlights[f.key] == f {
		delete(s.evFlights, f.key)
	}
	s.wg.Add(1)
	return f.clients, true
}

// evDone releases what a finished flight held.
func (s *Server) evDone(clients []evClient) {
	for range clients {
		<-s.inflight
	}
	s.wg.Done()
}

// evAnswer takes the upstream's answer (or the socket's error) for f, in
// the upstream socket's reader. res.wire is the reader's buffer.
func (s *Server) evAnswer(f *evFlight, res result, out *replyBatch) {
	clients, ok := s.evTake(f)
	if !ok {
		return
	}
	if res.err != nil || binary.BigEndian.Uint16(res.wire[2:])&flagTC != 0 {
		s.evHandoff(f, clients, &tried{u: f.u, r: bytes.Clone(res.wire), err: res.err}, false)
		return
	}
	r, err := s.fwd.settle(s.ctx, f.attempt, f.u, f.packed, f.start, res.wire, nil) // no TCP: not truncated
	if err != nil {
		s.evHandoff(f, clients, &tried{u: f.u, r: bytes.Clone(r), err: err}, true)
		return
	}
	a := &out.scratch
	ttl, ok := a.fromWire(out.scratchBuf, r)
	out.scratchBuf = a.wire[:0]
	if !ok {
		s.evHandoff(f, clients, &tried{u: f.u, r: bytes.Clone(r)}, true)
		return
	}
	if ttl > 0 {
		a = a.clone()
		s.cache.putAnswer([]byte(f.key), a, ttl, s.now())
	}
	var big []evClient
	for i := range clients {
		c := &clients[i]
		if resp := a.appendTo(out.buf(), &c.q, c.pkt, 0, c.q.udpSize); resp != nil {
			out.push(c.l, c.addr, resp)
		} else {
			big = append(big, *c)
		}
	}
	if len(big) == 0 {
		s.evDone(clients)
		recycle(f) // nothing refers to f now: see flights
		return
	}
	// Too big for these clients: truncated, off this reader. The others
	// are answered; their slots go back now.
	for range len(clients) - len(big) {
		<-s.inflight
	}
	whole := a.clone() // a is the batch's scratch
	go s.evReply(big, func(c *evClient) []byte { return whole.appendTruncated(nil, &c.q, c.pkt, 0, nil, c.q.udpSize) })
}

// evHandoff finishes f in a goroutine after its first try, done: the rest
// of the forward, then the replies. settled says whether done is already
// what settle made of the try's exchange. f has been taken (evTake).
func (s *Server) evHandoff(f *evFlight, clients []evClient, done *tried, settled bool) {
	go func() {
		if !settled {
			done.r, done.err = s.fwd.settle(s.ctx, f.attempt, done.u, f.packed, f.start, done.r, done.err)
		}
		r, err := s.fwd.run(s.ctx, f.deadline, f.packed, done)
		var a *answer
		if err == nil {
			a = s.keepWire(f.key, r)
		}
		s.evReply(clients, func(c *evClient) []byte { return s.wireReply(&c.q, c.pkt, a, err) })
	}()
}

// evReply writes reply(c) to each client and ends the flight.
func (s *Server) evReply(clients []evClient, reply func(c *evClient) []byte) {
	defer s.evDone(clients)
	for i := range clients {
		c := &clients[i]
		if resp := reply(c); resp != nil {
			if _, err := c.l.conn.WriteToUDPAddrPort(resp, c.addr); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("udp write failed", "to", c.addr, "err", err)
			}
		}
	}
}

// evClose ends every flight: their clients get no answer, as when the
// server closes under the goroutine path.
func (s *Server) evClose() {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	s.evClosed = true
	if s.evTimer != nil {
		s.evTimer.Stop()
	}
	for key, f := range s.evFlights {
		f.done = true
		f.sock.unregister(&f.w)
		for range f.clients {
			<-s.inflight
		}
		delete(s.evFlights, key)
	}
}
