package dnsproxy

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpBatch is how many datagrams one recvmmsg/sendmmsg moves at most.
const udpBatch = 32

// batchConn reads and writes several datagrams per system call (recvmmsg
// and sendmmsg on Linux, one at a time elsewhere).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

var (
	_ batchConn = (*ipv4.PacketConn)(nil)
	_ batchConn = (*ipv6.PacketConn)(nil)
)

// readUDP serves one UDP socket: fast answers are written back in a batch,
// everything else goes to a goroutine of the slow path.
func (s *Server) readUDP(conn *net.UDPConn) {
	defer s.wg.Done()
	l := &udpListener{conn: conn, bc: newBatchConn(conn)}
	bc := l.bc
	var sends sendBatch
	in := make([]ipv4.Message, udpBatch)
	out := make([]ipv4.Message, udpBatch)
	outBufs := make([][]byte, udpBatch)
	for i := range in {
		// One spare byte: a datagram that fills the buffer is too big.
		in[i].Buffers = [][]byte{make([]byte, maxQuerySize+1)}
		out[i].Buffers = make([][]byte, 1)
		outBufs[i] = make([]byte, 0, ourUDPSize) // a larger answer grows its own
	}
	keyBuf := make([]byte, 0, maxNameLen+3)
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("udp read failed", "err", err)
			time.Sleep(time.Millisecond) // e.g. ENOBUFS; do not spin
			continue
		}
		nout := 0
		now := time.Now()
		var mesh, hits, bad uint64
		for i := range n {
			m := &in[i]
			if m.N > maxQuerySize {
				bad++
				continue
			}
			pkt := m.Buffers[0][:m.N]
			resp, src := s.fast(pkt, outBufs[nout][:0], &keyBuf, false)
			if resp == nil {
				// m.Addr is the reader's, overwritten by the next read.
				addr := addrPort(m.Addr)
				if !s.forwardEvent(l, pkt, addr, &sends, now) {
					s.slowUDP(conn, pkt, addr)
				}
				continue
			}
			if src == srcMesh {
				mesh++
			} else {
				hits++
			}
			outBufs[nout] = resp[:0]
			out[nout].Buffers[0] = resp
			out[nout].Addr = m.Addr
			nout++
		}
		sends.flush()
		s.m.reqUDP.Add(uint64(n))
		if mesh > 0 {
			s.m.mesh.Add(mesh)
		}
		if hits > 0 {
			s.m.cacheHits.Add(hits)
		}
		if bad > 0 {
			s.m.malformed.Add(bad)
		}
		if err := writeAll(bc, out[:nout]); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("udp write failed", "err", err)
		}
		for i := range nout {
			out[i].Addr = nil
		}
	}
}

// slowUDP answers pkt from addr in a goroutine, or drops it when too many
// queries are already waiting.
func (s *Server) slowUDP(conn *net.UDPConn, pkt []byte, addr netip.AddrPort) {
	select {
	case s.inflight <- struct{}{}:
	default:
		s.m.dropped.Inc()
		return
	}
	pkt = bytes.Clone(pkt)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.inflight }()
		resp := s.forwardUDP(s.ctx, pkt)
		if resp == nil {
			resp = s.slow(s.ctx, pkt, false)
		}
		if resp != nil {
			if _, err := conn.WriteToUDPAddrPort(resp, addr); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("udp write failed", "to", addr, "err", err)
			}
		}
	}()
}

// addrPort is a datagram's source as a value (no allocation).
func addrPort(a net.Addr) netip.AddrPort {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort()
	}
	return netip.AddrPort{}
}
