package grpcserver

import (
	"bytes"
	"encoding/binary"
	"slices"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// putHeader writes a frame header into b.
func putHeader(b []byte, n int, typ http2.FrameType, flags http2.Flags, id uint32) {
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
	b[3], b[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(b[5:], id)
}

// writeFrame writes one frame whose payload fits a pooled buffer.
func (c *conn) writeFrame(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) error {
	bp := framePool.Get().(*[]byte)
	defer framePool.Put(bp)
	b := *bp
	putHeader(b, len(payload), typ, flags, id)
	n := 9 + copy(b[9:], payload)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.write(b[:n])
}

// write writes whole frames, holding wmu; a failed write closes the
// connection (the lock order is wmu, then mu).
func (c *conn) write(b []byte) error {
	_, err := c.nc.Write(b)
	return c.lost(err)
}

// lost closes the connection after a failed write, holding wmu, and
// tells the writer.
func (c *conn) lost(err error) error {
	if err == nil {
		return nil
	}
	c.close(err)
	return status.Errorf(codes.Unavailable, "grpcserver: connection lost: %v", err)
}

func (c *conn) writeWindowUpdate(id uint32, n int) error {
	return c.writeWindowUpdates(0, id, n)
}

// writeWindowUpdates credits the connection with conn bytes and stream id
// with n, either of them 0 for none, in one write: a DATA frame that
// passes both thresholds costs one system call and one TLS record, not
// two (docs/benchmarks.md, istiod xDS, "both credits in one write").
func (c *conn) writeWindowUpdates(conn int, id uint32, n int) error {
	bp := framePool.Get().(*[]byte)
	defer framePool.Put(bp)
	b, w := *bp, 0
	for _, u := range [2]struct {
		id uint32
		n  int
	}{{0, conn}, {id, n}} {
		if u.n > 0 {
			putHeader(b[w:], 4, http2.FrameWindowUpdate, 0, u.id)
			binary.BigEndian.PutUint32(b[w+9:], uint32(u.n))
			w += 9 + 4
		}
	}
	if w == 0 {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.write(b[:w])
}

func (c *conn) writeRST(id uint32, code http2.ErrCode) error {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(code))
	return c.writeFrame(http2.FrameRSTStream, 0, id, p[:])
}

func (c *conn) writeGoAway(code http2.ErrCode, msg string) {
	c.mu.Lock()
	last := c.maxStream
	c.mu.Unlock()
	c.writeGoAwayLast(last, code, msg)
}

func (c *conn) writeGoAwayLast(last uint32, code http2.ErrCode, msg string) {
	p := binary.BigEndian.AppendUint32(nil, last)
	p = binary.BigEndian.AppendUint32(p, uint32(code))
	c.writeFrame(http2.FrameGoAway, 0, 0, append(p, msg...))
}

// writeHeaders writes fields as a HEADERS frame (and CONTINUATION frames
// if they need more than one).
func (c *conn) writeHeaders(id uint32, fields []hpack.HeaderField, endStream bool) error {
	bp := framePool.Get().(*[]byte)
	defer framePool.Put(bp)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := c.appendHeaders((*bp)[:0], id, fields, endStream)
	if err != nil {
		return err
	}
	return c.write(b)
}

// appendHeaders encodes fields and appends them to b as a HEADERS frame
// and the CONTINUATION frames they need; holding wmu (the encoder's).
func (c *conn) appendHeaders(b []byte, id uint32, fields []hpack.HeaderField, endStream bool) ([]byte, error) {
	c.encBuf.Reset()
	for _, f := range fields {
		if err := c.enc.WriteField(f); err != nil {
			return nil, status.Errorf(codes.Internal, "grpcserver: encode header %s: %v", f.Name, err)
		}
	}
	block := c.encBuf.Bytes()
	typ, flags := http2.FrameHeaders, http2.Flags(0)
	if endStream {
		flags |= http2.FlagHeadersEndStream
	}
	for {
		n := min(len(block), c.maxData)
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders // the same bit for CONTINUATION
		}
		start := len(b)
		b = append(b, make([]byte, 9)...)
		putHeader(b[start:], n, typ, flags, id)
		b = append(b, block[:n]...)
		if block = block[n:]; len(block) == 0 {
			break
		}
		typ, flags = http2.FrameContinuation, 0
	}
	if cap(c.encBuf.Bytes()) > 4096 {
		c.encBuf = bytes.Buffer{} // a rare large block is not kept
	}
	c.wrote.Store(true)
	return b, nil
}

// reserve waits until st may send, and takes up to want bytes of the
// connection's and the stream's windows, at most writeFrames frames.
func (c *conn) reserve(st *stream, want int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, status.Error(codes.Unavailable, "grpcserver: connection closed")
		case st.reset:
			return 0, status.Error(codes.Canceled, "grpcserver: stream reset")
		case st.ctx.Err() != nil:
			return 0, status.FromContextError(st.ctx.Err()).Err()
		case c.sendWin > 0 && st.sendWin > 0:
			n := int(min(int64(want), c.sendWin, st.sendWin, int64(writeFrames*c.maxData)))
			c.sendWin -= int64(n)
			st.sendWin -= int64(n)
			return n, nil
		}
		c.cond.Wait()
	}
}

// writeMessage sends one gRPC message (its 5-byte prefix and data) in DATA
// frames as the windows allow, up to writeFrames frames in one write. The
// stream's response headers, if not sent yet, go in the first write, and
// trailers, if given (a unary call's status), in the last: one TLS record
// for a small answer, not three.
func (c *conn) writeMessage(st *stream, data mem.BufferSlice, trailers []hpack.HeaderField) error {
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(data.Len()))
	left := 5 + data.Len()
	src := pieces{first: prefix[:], rest: data}
	for left > 0 {
		n, err := c.reserve(st, left)
		if err != nil {
			return err
		}
		if err := c.writeData(st, &src, n, left == n, trailers); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// writeData writes n bytes of src in DATA frames, after the response
// headers if they are due and before trailers if this is the message's
// end. Frames of more than one go to the socket in one write.
func (c *conn) writeData(st *stream, src *pieces, n int, last bool, trailers []hpack.HeaderField) error {
	// The buffer is taken once the window allows: a writer waiting for a
	// slow client holds none.
	bp := framePool.Get().(*[]byte)
	defer framePool.Put(bp)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	corked := n > c.maxData
	if corked {
		c.sock.cork()
	}
	var err error
	for n > 0 && err == nil {
		k := min(n, c.maxData)
		n -= k
		var b []byte
		if b, err = c.appendData(st, (*bp)[:0], src, k, last && n == 0, trailers); err == nil {
			err = c.write(b)
		}
	}
	if corked {
		// What was written goes out even when a trailer failed to encode,
		// as it did frame by frame.
		if ferr := c.lost(c.sock.uncork()); err == nil {
			err = ferr
		}
	}
	return err
}

// appendData appends n bytes of src to b as a DATA frame, after the
// response headers if they are due and before trailers if last; holding
// wmu.
func (c *conn) appendData(st *stream, b []byte, src *pieces, n int, last bool, trailers []hpack.HeaderField) ([]byte, error) {
	var err error
	if !st.sentHeader {
		if b, err = c.appendHeaders(b, st.id, responseFields(st.header), false); err != nil {
			return nil, err
		}
		st.sentHeader = true
	}
	start := len(b)
	b = slices.Grow(b, 9+n)[:start+9+n]
	putHeader(b[start:], n, http2.FrameData, 0, st.id)
	src.read(b[start+9:])
	if last && trailers != nil {
		if b, err = c.appendHeaders(b, st.id, trailers, true); err != nil {
			return nil, err
		}
		st.sentTrailers = true
	}
	c.wrote.Store(true)
	return b, nil
}

// pieces reads a message's prefix and then its buffers in order.
type pieces struct {
	first []byte
	rest  mem.BufferSlice
	off   int // into rest[0]
}

func (p *pieces) read(dst []byte) {
	for len(dst) > 0 {
		if len(p.first) > 0 {
			n := copy(dst, p.first)
			p.first, dst = p.first[n:], dst[n:]
			continue
		}
		d := p.rest[0].ReadOnlyData()[p.off:]
		n := copy(dst, d)
		dst = dst[n:]
		if p.off += n; p.off == len(p.rest[0].ReadOnlyData()) {
			p.rest, p.off = p.rest[1:], 0
		}
	}
}
