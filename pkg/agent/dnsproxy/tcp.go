package dnsproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// tcpPipeline bounds the queries of one TCP connection answered at once
// (RFC 7766 pipelining); further reads wait for a slot.
const tcpPipeline = 16

// acceptTCP accepts client connections until the listener is closed.
func (s *Server) acceptTCP(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("tcp accept failed", "err", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE; do not spin
			continue
		}
		select {
		case s.tcpSlots <- struct{}{}:
		default:
			s.m.dropped.Inc()
			_ = c.Close()
			continue
		}
		if !s.track(c) {
			_ = c.Close()
			<-s.tcpSlots
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// serveConn answers the length-prefixed queries of one connection until it
// closes, idles out, or sends a short frame.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.untrack(c)
		_ = c.Close()
		<-s.tcpSlots
	}()
	var pending sync.WaitGroup
	defer pending.Wait()
	var wmu sync.Mutex
	write := func(resp []byte) bool {
		frame := make([]byte, 2+len(resp))
		binary.BigEndian.PutUint16(frame, uint16(len(resp)))
		copy(frame[2:], resp)
		wmu.Lock()
		defer wmu.Unlock()
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		_, err := c.Write(frame)
		return err == nil
	}
	slots := make(chan struct{}, tcpPipeline)
	keyBuf := make([]byte, 0, maxNameLen+3)
	out := make([]byte, 0, 2048)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			s.m.malformed.Inc() // truncated frame
			return
		}
		s.m.reqTCP.Inc()
		if resp, src := s.fast(msg, out[:0], &keyBuf, true); resp != nil {
			if src == srcMesh {
				s.m.mesh.Inc()
			} else {
				s.m.cacheHits.Inc()
			}
			if !write(resp) {
				return
			}
			continue
		}
		slots <- struct{}{}
		pending.Add(1)
		go func() {
			defer pending.Done()
			defer func() { <-slots }()
			if resp := s.slow(s.ctx, msg, true); resp != nil {
				write(resp)
			}
		}()
	}
}
