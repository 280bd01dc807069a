package dnsproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// tcpIdle is how long a connection to an upstream is kept once no query
// waits on it: long enough for a burst of truncated answers to share it,
// short enough not to hold one of an upstream's few TCP workers (dnsmasq
// serves at most 20 connections at once, a process each) for long.
const tcpIdle = 2 * time.Second

// errConnLost means the upstream TCP connection ended while a query waited
// on it (or before it could be sent).
var errConnLost = errors.New("upstream tcp connection lost")

// tcpPool keeps one TCP connection to an upstream for the queries that
// need TCP (truncated UDP answers), pipelined on it (RFC 7766) and matched
// to their answers by ID and question, so that each is not a new handshake
// (and, for dnsmasq, a new process). A connection the upstream closed
// while idle is replaced once, transparently.
type tcpPool struct {
	server netip.AddrPort
	idle   time.Duration

	mu     sync.Mutex
	cur    *tcpConn
	closed bool
	wg     sync.WaitGroup // readers
}

// tcpConn is one connection and the queries waiting on it.
type tcpConn struct {
	pool *tcpPool
	c    net.Conn
	wmu  sync.Mutex // one frame at a time

	mu      sync.Mutex
	pending waiters
	dead    bool
	idle    *time.Timer
}

func newTCPPool(server netip.AddrPort) *tcpPool {
	return &tcpPool{server: server, idle: tcpIdle}
}

// exchange sends the query packed over the pool's connection and returns
// the wire form of the answer whose ID and question match, by deadline or
// until ctx ends.
func (p *tcpPool) exchange(ctx context.Context, deadline time.Time, packed []byte) ([]byte, error) {
	id, question, err := queryKey(packed)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		c, reused, err := p.conn(ctx, deadline)
		if err != nil {
			return nil, err
		}
		r, err := c.roundTrip(ctx, deadline, &waiter{id: id, question: question, ch: make(chan result, 1)}, packed)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if reused && try == 0 && errors.Is(err, errConnLost) && time.Now().Before(deadline) {
			continue // the upstream closed the connection we kept: a new one
		}
		return nil, fmt.Errorf("exchange with %s over tcp: %w", p.server, err)
	}
}

// conn returns the live connection, or dials one. reused says whether it
// had been used before.
func (p *tcpPool) conn(ctx context.Context, deadline time.Time) (c *tcpConn, reused bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, errPoolClosed
	}
	if p.cur != nil {
		return p.cur, true, nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", p.server.String())
	if err != nil {
		return nil, false, fmt.Errorf("dial tcp %s: %w", p.server, err)
	}
	c = &tcpConn{pool: p, c: nc, pending: waiters{}}
	p.cur = c
	p.wg.Add(1)
	go c.read()
	return c, false, nil
}

// close closes the connection, fails its queries and waits for its reader.
func (p *tcpPool) close() {
	p.mu.Lock()
	p.closed = true
	c := p.cur
	p.mu.Unlock()
	if c != nil {
		c.fail(errPoolClosed)
	}
	p.wg.Wait()
}

// roundTrip sends packed and waits for w's answer.
func (c *tcpConn) roundTrip(ctx context.Context, deadline time.Time, w *waiter, packed []byte) ([]byte, error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return nil, errConnLost
	}
	if c.idle != nil {
		c.idle.Stop()
	}
	c.pending.add(w)
	c.mu.Unlock()
	defer c.unregister(w)

	frame := make([]byte, 2, 2+len(packed))
	binary.BigEndian.PutUint16(frame, uint16(len(packed)))
	frame = append(frame, packed...)
	c.wmu.Lock()
	_ = c.c.SetWriteDeadline(deadline)
	_, err := c.c.Write(frame)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", errConnLost, err))
		return nil, fmt.Errorf("%w: %w", errConnLost, err)
	}
	return w.wait(ctx, deadline)
}

// unregister forgets w; the last query out starts the idle timer.
func (c *tcpConn) unregister(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending.remove(w)
	if len(c.pending) > 0 || c.dead {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(c.pool.idle, c.closeIdle)
	} else {
		c.idle.Reset(c.pool.idle)
	}
}

// closeIdle closes the connection if no query waits on it.
func (c *tcpConn) closeIdle() {
	c.mu.Lock()
	idle := len(c.pending) == 0
	c.mu.Unlock()
	if idle {
		c.fail(errConnLost)
	}
}

// fail ends the connection: it leaves the pool, and every waiting query
// gets err.
func (c *tcpConn) fail(err error) {
	c.pool.mu.Lock()
	if c.pool.cur == c {
		c.pool.cur = nil
	}
	c.pool.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		_ = c.c.Close() // the reader sees it and exits
	}
	c.pending.keepOnly(func(w *waiter) bool {
		select {
		case w.ch <- result{err: err}:
		default:
		}
		return true
	})
}

// read delivers each answer to the query it answers until the connection
// ends.
func (c *tcpConn) read() {
	defer c.pool.wg.Done()
	var l [2]byte
	for {
		if _, err := io.ReadFull(c.c, l[:]); err != nil {
			c.fail(fmt.Errorf("%w: %w", errConnLost, err))
			return
		}
		body := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c.c, body); err != nil {
			c.fail(fmt.Errorf("%w: %w", errConnLost, err))
			return
		}
		if len(body) < headerLen {
			continue
		}
		c.mu.Lock()
		if w := c.pending.match(body); w != nil {
			select {
			case w.ch <- result{wire: body}:
			default:
			}
		}
		c.mu.Unlock()
	}
}
