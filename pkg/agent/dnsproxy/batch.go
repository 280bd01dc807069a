package dnsproxy

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpListener is one client-facing UDP socket.
type udpListener struct {
	conn *net.UDPConn
	bc   batchConn
}

// xnetBatchConn wraps c for batched reads and writes in its address
// family with golang.org/x/net (recvmmsg and sendmmsg on Linux, one
// datagram at a time elsewhere). newBatchConn (mmsg_*.go) builds on it.
func xnetBatchConn(c *net.UDPConn) batchConn {
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		return ipv6.NewPacketConn(c)
	}
	return ipv4.NewPacketConn(c)
}

// writeAll sends ms on bc, skipping a datagram the kernel refuses. It
// returns the first error, or nil; net.ErrClosed ends it.
func writeAll(bc batchConn, ms []ipv4.Message) error {
	var first error
	for sent := 0; sent < len(ms); {
		k, err := bc.WriteBatch(ms[sent:], 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if first == nil {
				first = err
			}
			k = 1
		}
		sent += k
	}
	return first
}

// sendBatch gathers the upstream queries of one batch of client queries,
// to leave in one sendmmsg per upstream socket.
type sendBatch struct {
	sock  *udpSock // the socket this batch's queries prefer
	socks []*udpSock
	msgs  []ipv4.Message
	group []ipv4.Message // scratch for one socket's messages
	// The queries are copied into arena (ends[i] is where query i ends):
	// a flight may be answered, and reused, before the batch leaves.
	arena []byte
	ends  []int
	bufs  [][]byte // the messages' buffers, slices of arena
}

func (b *sendBatch) add(s *udpSock, packed []byte) {
	if b.sock == nil {
		b.sock = s
	}
	b.socks = append(b.socks, s)
	b.arena = append(b.arena, packed...)
	b.ends = append(b.ends, len(b.arena))
}

// flush sends every query, socket by socket. A socket that fails a send is
// failed as a whole (its queries go on elsewhere), as a failed write fails
// it in exchange.
func (b *sendBatch) flush() {
	b.sock = nil
	start := 0
	for _, end := range b.ends { // the arena no longer grows: slice it
		b.bufs = append(b.bufs, b.arena[start:end:end])
		start = end
	}
	for i := range b.bufs {
		b.msgs = append(b.msgs, ipv4.Message{Buffers: b.bufs[i : i+1 : i+1]})
	}
	for len(b.socks) > 0 {
		s := b.socks[0]
		b.group = b.group[:0]
		rest := 0
		for i, x := range b.socks {
			if x == s {
				b.group = append(b.group, b.msgs[i])
				continue
			}
			b.socks[rest], b.msgs[rest] = x, b.msgs[i]
			rest++
		}
		clear(b.socks[rest:])
		clear(b.msgs[rest:])
		b.socks, b.msgs = b.socks[:rest], b.msgs[:rest]
		if err := writeAll(s.bc, b.group); err != nil {
			s.fail(err)
		}
	}
	clear(b.group[:cap(b.group)])
	clear(b.bufs)
	b.arena, b.ends, b.bufs = b.arena[:0], b.ends[:0], b.bufs[:0]
}

// replyBatch gathers replies to clients, to leave in one sendmmsg per
// listener. Its buffers are reused from batch to batch.
type replyBatch struct {
	// scratch serves answers that are not cached, without allocating.
	scratch    answer
	scratchBuf []byte

	bufs  [][]byte
	ls    []*udpListener
	msgs  []ipv4.Message
	addrs []net.UDPAddr // the messages' addresses, reused
	group []ipv4.Message
	n     int
}

func newReplyBatch() *replyBatch { return &replyBatch{} }

// buf returns an empty buffer for the next reply.
func (b *replyBatch) buf() []byte {
	if b.n == len(b.bufs) {
		b.bufs = append(b.bufs, make([]byte, 0, 512))
		b.ls = append(b.ls, nil)
		b.msgs = append(b.msgs, ipv4.Message{Buffers: make([][]byte, 1)})
		b.addrs = append(b.addrs, net.UDPAddr{})
	}
	return b.bufs[b.n][:0]
}

// push queues resp, written into the buffer buf returned, for addr on l.
func (b *replyBatch) push(l *udpListener, addr netip.AddrPort, resp []byte) {
	b.bufs[b.n] = resp[:0] // keep the buffer as grown
	b.ls[b.n] = l
	b.msgs[b.n].Buffers[0] = resp
	b.msgs[b.n].Addr = setUDPAddr(&b.addrs[b.n], addr)
	b.n++
	if b.n == udpBatch {
		b.flush()
	}
}

// flush sends the queued replies, listener by listener.
func (b *replyBatch) flush() {
	for done := 0; done < b.n; {
		l := b.ls[done]
		b.group = b.group[:0]
		for i := done; i < b.n; i++ {
			if b.ls[i] == l {
				b.group = append(b.group, b.msgs[i])
				b.ls[i] = nil
			}
		}
		_ = writeAll(l.bc, b.group) // a lost reply is a lost datagram: the client retries
		for done < b.n && b.ls[done] == nil {
			done++
		}
	}
	for i := range b.n {
		b.msgs[i].Addr = nil
		b.msgs[i].Buffers[0] = nil
	}
	clear(b.group[:cap(b.group)])
	b.n = 0
}

// setUDPAddr writes ap into a, reusing a's IP slice, and returns a.
func setUDPAddr(a *net.UDPAddr, ap netip.AddrPort) *net.UDPAddr {
	ip := ap.Addr()
	if ip.Is4() {
		b := ip.As4()
		a.IP = append(a.IP[:0], b[:]...)
	} else {
		b := ip.As16()
		a.IP = append(a.IP[:0], b[:]...)
	}
	a.Port, a.Zone = int(ap.Port()), ip.Zone()
	return a
}
