package xds

import "google.golang.org/grpc"

// A stream's handler goroutine reads its requests; pushes run on a
// goroutine started when a push is queued for an idle connection, which
// ends when nothing is pending (at most PushConcurrency push at once). An
// idle sidecar costs the handler goroutine alone, not also one blocked on
// requests while the handler waits for pushes. sendMu orders the two: a
// request is handled, or an event pushed, whole.

// start makes the connection ready for pushes on stream. Call before the
// connection is registered.
func (c *Connection) start(stream grpc.ServerStream) { c.stream = stream }

// enqueue merges ev into what is pending and starts the push goroutine
// unless it runs.
func (c *Connection) enqueue(ev *pushEvent) {
	c.pendingMu.Lock()
	c.pending = c.pending.merge(ev)
	run := !c.pushing
	c.pushing = true
	c.pendingMu.Unlock()
	if run {
		go c.pushPending()
	}
}

// pushPending pushes pending events until none is left or the stream
// ended.
func (c *Connection) pushPending() {
	ctx := c.stream.Context()
	if err := c.server.sem.Acquire(ctx, 1); err != nil {
		return // the stream ended: nothing is pushed again
	}
	defer c.server.sem.Release(1)
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
