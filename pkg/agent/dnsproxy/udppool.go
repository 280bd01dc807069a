package dnsproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// The pool's shape. A socket answers for its random source port for at most
// sockMaxUses queries or sockMaxAge, whichever comes first, so an off-path
// attacker who learns a port has little time to use it; a query still has
// to match a random ID and the exact question.
const (
	poolSockets = 4
	sockMaxUses = 2048
	sockMaxAge  = 10 * time.Second
)

// errPoolClosed means the pool was closed while a query waited.
var errPoolClosed = errors.New("upstream socket pool closed")

// udpPool keeps a few long-lived connected UDP sockets to one upstream, each
// on a port the kernel picked at random, and demultiplexes their answers to
// the waiting queries by ID and question. It replaces a socket per query,
// whose dial, bind and close cost more than the exchange itself.
type udpPool struct {
	server  netip.AddrPort
	size    int           // live sockets, poolSockets
	maxUses int           // queries per socket, sockMaxUses
	maxAge  time.Duration // a socket's life, sockMaxAge
	now     func() time.Time

	mu     sync.Mutex
	socks  []*udpSock // live sockets taking new queries, at most size
	next   int
	closed bool
	wg     sync.WaitGroup // reader goroutines
}

// udpSock is one pooled socket and the queries waiting on it.
type udpSock struct {
	pool *udpPool
	conn *net.UDPConn
	bc   batchConn // conn, several datagrams per system call
	born time.Time

	mu      sync.Mutex
	uses    int
	retired bool // takes no new queries; closed once idle
	pending waiters
}

// waiter is one query waiting for its answer, on a channel or, for the
// event path, in a function the socket's reader calls.
type waiter struct {
	id       uint16
	question []byte      // the query's question section, as sent
	ch       chan result // buffered: the reader never blocks
	next     *waiter     // the next waiter with the same ID (waiters)
	// flight, when set instead of ch, is the event-path flight this
	// waiter belongs to: it takes the result in the reader's goroutine (or
	// in fail's caller) with the reader's replies to add to, and res.wire
	// is the reader's buffer, valid only during the call.
	flight *evFlight
}

// result is what a waiter receives: the answer's wire form, or an error.
type result struct {
	wire []byte
	err  error
}

func newUDPPool(server netip.AddrPort) *udpPool {
	return &udpPool{server: server, size: poolSockets, maxUses: sockMaxUses, maxAge: sockMaxAge, now: time.Now}
}

// exchange sends the query packed and returns the wire form of the answer
// whose ID and question match it, waiting until deadline or until ctx ends.
func (p *udpPool) exchange(ctx context.Context, deadline time.Time, packed []byte) ([]byte, error) {
	r, err := p.roundTrip(ctx, deadline, packed)
	if err != nil {
		return nil, fmt.Errorf("exchange with %s over udp: %w", p.server, err)
	}
	return r, nil
}

func (p *udpPool) roundTrip(ctx context.Context, deadline time.Time, packed []byte) ([]byte, error) {
	id, question, err := queryKey(packed)
	if err != nil {
		return nil, err
	}
	s, w, err := p.register(id, question)
	if err != nil {
		return nil, err
	}
	defer s.unregister(w)
	if _, err := s.conn.Write(packed); err != nil {
		s.fail(err)
		return nil, err
	}
	return w.wait(ctx, deadline)
}

// register picks a socket for the query with id and question, opening or
// rotating one as needed, and records the query as waiting on it.
func (p *udpPool) register(id uint16, question []byte) (*udpSock, *waiter, error) {
	w := &waiter{id: id, question: question, ch: make(chan result, 1)}
	s, err := p.add(w)
	return s, w, err
}

// registerFlight records w, the waiter of an event-path flight for the
// query packed, preferring the socket prefer when it is one of p's and
// takes queries. The query is not sent: the caller writes packed to the
// socket returned.
func (p *udpPool) registerFlight(w *waiter, packed []byte, prefer *udpSock, now time.Time) (*udpSock, error) {
	id, question, err := queryKey(packed)
	if err != nil {
		return nil, err
	}
	w.id, w.question = id, question
	if prefer != nil && prefer.pool == p && prefer.add(w, now) {
		return prefer, nil
	}
	return p.add(w)
}

// add records w on a socket, opening or rotating one as needed.
func (p *udpPool) add(w *waiter) (*udpSock, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	for range p.size + 1 {
		if len(p.socks) < p.size {
			s, err := p.open()
			if err != nil {
				return nil, err
			}
			p.socks = append(p.socks, s)
		}
		p.next = (p.next + 1) % len(p.socks)
		s := p.socks[p.next]
		if s.add(w, p.now()) {
			return s, nil
		}
		p.socks = append(p.socks[:p.next], p.socks[p.next+1:]...) // s retired itself
	}
	return nil, fmt.Errorf("no usable socket to %s", p.server)
}

// open makes a socket and starts its reader. Called with p.mu held.
func (p *udpPool) open() (*udpSock, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(p.server))
	if err != nil {
		return nil, fmt.Errorf("dial udp %s: %w", p.server, err)
	}
	s := &udpSock{pool: p, conn: c, bc: newBatchConn(c), born: p.now(), pending: waiters{}}
	p.wg.Add(1)
	go s.read()
	return s, nil
}

// drop takes s out of the pool's live sockets, if it is still there.
func (p *udpPool) drop(s *udpSock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.socks {
		if x == s {
			p.socks = append(p.socks[:i], p.socks[i+1:]...)
			return
		}
	}
}

// close closes every socket, fails the waiting queries and waits for the
// readers to exit.
func (p *udpPool) close() {
	p.mu.Lock()
	p.closed = true
	socks := p.socks
	p.socks = nil
	p.mu.Unlock()
	for _, s := range socks {
		s.retire()
		_ = s.conn.Close()
	}
	p.wg.Wait()
}

// add records w unless s is due for rotation, in which case s retires and
// add reports false.
func (s *udpSock) add(w *waiter, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired || s.uses >= s.pool.maxUses || now.Sub(s.born) >= s.pool.maxAge {
		s.retireLocked()
		return false
	}
	s.uses++
	s.pending.add(w)
	return true
}

// unregister forgets w; the last query on a retired socket closes it.
func (s *udpSock) unregister(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending.remove(w)
	s.closeIfIdleLocked()
}

func (s *udpSock) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retireLocked()
}

func (s *udpSock) retireLocked() {
	s.retired = true
	s.closeIfIdleLocked()
}

func (s *udpSock) closeIfIdleLocked() {
	if s.retired && len(s.pending) == 0 {
		_ = s.conn.Close() // the reader sees the error and exits
	}
}

// fail hands err to every waiting query and retires s: an ICMP error or a
// failed write is about the socket, not one query. Waiters of flights
// are forgotten and their flights given err after s is unlocked.
func (s *udpSock) fail(err error) {
	s.pool.drop(s)
	var flights []*waiter
	s.mu.Lock()
	s.pending.keepOnly(func(w *waiter) bool {
		if w.flight != nil {
			flights = append(flights, w)
			return false
		}
		select {
		case w.ch <- result{err: err}:
		default:
		}
		return true
	})
	s.retireLocked()
	s.mu.Unlock()
	if len(flights) == 0 {
		return
	}
	out := newReplyBatch()
	for _, w := range flights {
		w.flight.srv.evAnswer(w.flight, result{err: err}, out)
	}
	out.flush()
}

// readBatch is how many answers the reader takes per system call.
const readBatch = 8

// sockReader is what an upstream socket's reader reads into and replies
// from. Sockets are replaced every sockMaxUses queries, so the readers'
// buffers are reused rather than made for each socket (33 kB).
type sockReader struct {
	ms  []ipv4.Message
	out *replyBatch
}

var readers = sync.Pool{New: func() any {
	rs := &sockReader{ms: make([]ipv4.Message, readBatch), out: newReplyBatch()}
	for i := range rs.ms {
		// One byte more than any answer we ask for: a datagram that fills
		// the buffer was cut, and is handled as truncated (TCP follows).
		rs.ms[i].Buffers = [][]byte{make([]byte, maxUDPSize+1)}
	}
	return rs
}}

// read delivers each datagram to the query it answers and ignores the rest
// (late answers, forgeries), until the socket is closed. Replies that the
// event path makes of a batch of answers leave together.
func (s *udpSock) read() {
	defer s.pool.wg.Done()
	rs := readers.Get().(*sockReader)
	defer readers.Put(rs) // the reader's buffers are its own: no one keeps them
	ms, out := rs.ms, rs.out
	for {
		n, err := s.bc.ReadBatch(ms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				s.fail(errPoolClosed)
				return
			}
			s.fail(err) // e.g. connection refused: the upstream is not there
			continue    // the retired socket closes once its waiters leave
		}
		for i := range n {
			m := &ms[i]
			if m.N < headerLen {
				continue
			}
			resp := m.Buffers[0][:m.N]
			if m.N > maxUDPSize || m.Flags&syscall.MSG_TRUNC != 0 {
				resp[2] |= flagTC >> 8
			}
			s.deliver(resp, out)
		}
		out.flush()
	}
}

// deliver hands resp to the query it answers, if one waits: a copy on its
// channel, or the buffer itself to its flight.
func (s *udpSock) deliver(resp []byte, out *replyBatch) {
	s.mu.Lock()
	w := s.pending.match(resp)
	switch {
	case w == nil:
		s.mu.Unlock()
	case w.flight == nil:
		select {
		case w.ch <- result{wire: bytes.Clone(resp)}:
		default:
		}
		s.mu.Unlock()
	default:
		s.pending.remove(w)
		s.closeIfIdleLocked()
		s.mu.Unlock()
		w.flight.srv.evAnswer(w.flight, result{wire: resp}, out)
	}
}
