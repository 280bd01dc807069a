// Package tlsrecord bounds the buffer crypto/tls keeps for each connection.
//
// A tls.Conn reads records from its socket into a buffer it keeps for the
// connection's life. It reads as much as the socket holds, and when what it
// read runs past the record it needs, it doubles the buffer: a peer that
// sends a burst (a sidecar subscribing to a thousand clusters) leaves the
// server holding 32 KiB or more per connection, long after the burst. Conn
// sits under the tls.Conn and ends each read at the end of the record being
// read, so the buffer holds one record at a time and stays at the size of
// the largest record (at most 16 KiB of payload plus overhead): two reads
// per record, a record header and then its body, where a burst took one.
// Bytes pass through unchanged; Conn only chooses where reads stop.
package tlsrecord

import (
	"encoding/binary"
	"errors"
	"net"
	"syscall"
)

// headerLen is the length of a TLS record header: type, version, length.
const headerLen = 5

// Conn is a net.Conn whose reads never cross a TLS record boundary.
type Conn struct {
	net.Conn
	hdr  [headerLen]byte
	nhdr int // bytes of the current record's header read so far
	left int // bytes of the current record's body still to read
}

// NewConn wraps c, the socket under a tls.Conn.
func NewConn(c net.Conn) *Conn { return &Conn{Conn: c} }

// Read reads at most the rest of the current record's header, or of its
// body once the header is read.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return c.Conn.Read(p)
	}
	if c.nhdr < headerLen {
		n, err := c.Conn.Read(p[:min(len(p), headerLen-c.nhdr)])
		c.header(p[:n])
		return n, err
	}
	n, err := c.Conn.Read(p[:min(len(p), c.left)])
	c.body(n)
	return n, err
}

// header records header bytes read.
func (c *Conn) header(b []byte) {
	c.nhdr += copy(c.hdr[c.nhdr:], b)
	if c.nhdr == headerLen {
		c.left = int(binary.BigEndian.Uint16(c.hdr[3:]))
		if c.left == 0 {
			c.nhdr = 0
		}
	}
}

// body records n body bytes read.
func (c *Conn) body(n int) {
	c.left -= n
	if c.left == 0 {
		c.nhdr = 0
	}
}

// SyscallConn returns the socket's syscall.RawConn, so that those who set
// socket options through it (gRPC's transport) still can.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errNotSyscall
	}
	return sc.SyscallConn()
}

// errNotSyscall says the wrapped conn has no file descriptor.
var errNotSyscall = errors.New("tlsrecord: wrapped connection is not a syscall.Conn")

var _ syscall.Conn = (*Conn)(nil)
