package grpcserver

import (
	"net"
	"sync"
)

const (
	// writeFrames is how many DATA frames of a message a writer sends in
	// one write to the socket, 64 KiB: one send per 16 KiB frame cost the
	// sender about a quarter more CPU per message on TLS, and its peer a
	// sixth more (docs/benchmarks.md, istiod xDS, "a message's frames in
	// one write").
	writeFrames = 4
	// corkSize holds writeFrames frames as TLS records, with the response
	// headers and trailers that may share their writes, and each record's
	// header and tag.
	corkSize = writeFrames*maxFrame + 2*frameSpare + 8*32
)

// corkPool holds the buffers of corked sockets; one is taken for a write
// of several frames and given back when it is sent.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkSize); return &b }}

// corkConn is the socket under a connection's frames, under tls.Conn on a
// TLS port. While a writer has it corked, what is written to it gathers in
// a buffer that uncork sends in one write: crypto/tls writes each record
// on its own, so a message of many frames would otherwise cost a system
// call, a TCP segment and a wake-up of the peer per 16 KiB. The lock keeps
// the order of records that crypto/tls writes by itself (a KeyUpdate, a
// close_notify) while a writer has the socket corked.
type corkConn struct {
	net.Conn
	mu  sync.Mutex
	buf *[]byte // what was written since cork; nil when not corked
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != nil {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// cork starts gathering writes; the caller holds the connection's write
// lock until uncork.
func (c *corkConn) cork() {
	b := corkPool.Get().(*[]byte)
	c.mu.Lock()
	c.buf = b
	c.mu.Unlock()
}

// uncork sends what was gathered in one write and stops gathering.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	b := c.buf
	c.buf = nil
	var err error
	if len(*b) > 0 {
		_, err = c.Conn.Write(*b)
	}
	c.mu.Unlock()
	if cap(*b) <= corkSize {
		*b = (*b)[:0]
		corkPool.Put(b)
	}
	return err
}
