package xds

import (
	"sync"

	"google.golang.org/grpc"
)

// A stream's handler goroutine reads its requests; pushes run on the
// server's push workers. Queuing a push for an idle connection puts it on
// the server's queue; up to PushConcurrency workers take connections from
// it in order, and a worker ends when the queue is empty. An idle istiod
// has no worker, and an idle sidecar costs its handler goroutine alone. A
// worker pushes one connection after another on the stack it grew for the
// first, where a goroutine per connection grew a stack for each of them.
// sendMu orders requests and pushes: a request is handled, or an event
// pushed, whole.

// start makes the connection ready for pushes on stream. Call before the
// connection is registered.
func (c *Connection) start(stream grpc.ServerStream) { c.stream = stream }

// enqueue merges ev into what is pending and queues the connection unless
// it is queued or being pushed.
func (c *Connection) enqueue(ev *pushEvent) {
	c.pendingMu.Lock()
	c.pending = c.pending.merge(ev)
	queue := !c.pushing
	c.pushing = true
	c.pendingMu.Unlock()
	if queue {
		c.server.pushes.add(c)
	}
}

// pushPending pushes pending events until none is left or the stream
// ended.
func (c *Connection) pushPending() {
	if c.stream.Context().Err() != nil {
		return // the stream ended: nothing is pushed again
	}
	for {
		c.pendingMu.Lock()
		ev := c.pending
		c.pending = nil
		if ev == nil {
			c.pushing = false
			c.pendingMu.Unlock()
			return
		}
		c.pendingMu.Unlock()
		c.sendMu.Lock()
		if c.closed {
			c.sendMu.Unlock()
			return
		}
		var err error
		if c.delta {
			err = c.pushDelta(c.stream, ev)
		} else {
			err = c.pushSotW(c.stream, ev)
		}
		c.sendMu.Unlock()
		if err != nil {
			// A send fails when the stream broke; its RecvMsg fails too,
			// and the handler ends the stream.
			c.server.log.Debug("push failed", "proxy", c.proxy.ID, "connection", c.id, "err", err)
			return
		}
	}
}

// close waits for a push in progress and stops later ones: nothing is sent
// once the handler returns.
func (c *Connection) close() {
	c.sendMu.Lock()
	c.closed = true
	c.sendMu.Unlock()
}

// whole runs handle (a request's handling) with no push in between; c may
// be nil (no connection yet: nothing is pushed).
func (c *Connection) whole(handle func() error) error {
	if c == nil {
		return handle()
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return handle()
}

// workQueue runs each added item on one of at most limit goroutines, in
// the order added. The goroutines start as items come and end when none
// is left.
type workQueue[T any] struct {
	limit int
	run   func(T)

	mu      sync.Mutex
	items   []T
	workers int
}

func newWorkQueue[T any](limit int, run func(T)) *workQueue[T] {
	return &workQueue[T]{limit: limit, run: run}
}

// add queues item, starting a worker if fewer than limit run.
func (q *workQueue[T]) add(item T) {
	q.mu.Lock()
	q.items = append(q.items, item)
	start := q.workers < q.limit
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start {
		go q.work()
	}
}

func (q *workQueue[T]) work() {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.items = nil // what a burst grew goes with it
			q.workers--
			q.mu.Unlock()
			return
		}
		item := q.items[0]
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		q.mu.Unlock()
		q.run(item)
	}
}
