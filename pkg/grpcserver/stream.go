package grpcserver

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// stream is one RPC. The fields under "conn.mu" are shared by the reader
// and the handler; the reader alone assembles messages; the handler alone
// sends.
type stream struct {
	c        *conn
	id       uint32
	m        *method
	method   string
	ctx      context.Context
	cancel   context.CancelFunc
	stopWake func() bool
	notify   chan struct{} // a message, the end of input or a reset

	// Under conn.mu.
	sendWin    int64
	queue      [][]byte // complete messages
	queued     int      // their bytes on the wire
	withheld   int      // received bytes not credited while queued > queueLimit
	credit     int      // received bytes to credit
	halfClosed bool     // the client ended its side
	reset      bool     // RST_STREAM either way
	recvErr    error

	// The reader's, under conn.mu: the message being assembled, of size
	// bytes; blocked while it waits for admission, its window withheld.
	pre     [5]byte
	npre    int
	msg     []byte
	size    int
	blocked bool
	done    bool // the handler returned: the budget it held is given back
	skip    int  // bytes of a refused message still to discard

	// The handler's.
	sentHeader      bool
	sentTrailers    bool
	header, trailer metadata.MD
}

var _ grpc.ServerStream = (*stream)(nil)

// headers handles a HEADERS frame: a new stream, or the client's
// trailers on an open one.
func (c *conn) headers(flags http2.Flags, id uint32, p []byte) error {
	if id == 0 || id%2 == 0 {
		return connError{http2.ErrCodeProtocol, "HEADERS on stream " + strconv.FormatUint(uint64(id), 10)}
	}
	p, err := unpad(flags, p)
	if err != nil {
		return err
	}
	if flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return connError{http2.ErrCodeProtocol, "short HEADERS priority"}
		}
		p = p[5:]
	}
	end := flags.Has(http2.FlagHeadersEndStream)
	if !flags.Has(http2.FlagHeadersEndHeaders) {
		c.block, c.blockStream, c.blockEnd = append([]byte(nil), p...), id, end
		return nil
	}
	return c.open(id, p, end)
}

// request is what a stream's headers ask for.
type request struct {
	method, path, contentType, encoding, timeout string
	md                                           metadata.MD
}

func parseRequest(fields []hpack.HeaderField) (request, error) {
	r := request{md: metadata.MD{}}
	for _, f := range fields {
		switch f.Name {
		case ":method":
			r.method = f.Value
		case ":path":
			r.path = f.Value
		case ":authority":
			r.md[":authority"] = append(r.md[":authority"], f.Value)
		case "content-type":
			r.contentType = f.Value
			r.md[f.Name] = append(r.md[f.Name], f.Value)
		case "grpc-encoding":
			r.encoding = f.Value
		case "grpc-timeout":
			r.timeout = f.Value
		case "te", "grpc-accept-encoding", "connection":
		default:
			if strings.HasPrefix(f.Name, ":") {
				continue
			}
			v := f.Value
			if strings.HasSuffix(f.Name, "-bin") {
				b, err := decodeBinary(v)
				if err != nil {
					return r, status.Errorf(codes.Internal, "grpcserver: malformed binary metadata %s: %v", f.Name, err)
				}
				v = string(b)
			}
			r.md[f.Name] = append(r.md[f.Name], v)
		}
	}
	return r, nil
}

func decodeBinary(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// open decodes a complete header block and starts its stream's handler,
// or answers it at once.
func (c *conn) open(id uint32, block []byte, end bool) error {
	// Every block is decoded, refused or not: the decoder's table follows
	// the client's encoder.
	fields, err := c.dec.DecodeFull(block)
	if err != nil {
		return connError{http2.ErrCodeCompression, err.Error()}
	}
	if id <= c.maxStream {
		// Trailers: gRPC clients send none, but they end the client's side.
		if end {
			c.mu.Lock()
			if st := c.streams[id]; st != nil {
				st.halfClosed = true
				st.wake()
			}
			c.mu.Unlock()
		}
		return nil
	}
	c.maxStream = id
	r, err := parseRequest(fields)
	if err != nil {
		return c.refuse(id, end, status.Convert(err))
	}
	if r.method != "POST" || !grpcwire.IsGRPC(r.contentType) {
		return c.writeRST(id, http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	full := c.goingAway || len(c.streams) >= int(c.s.opts.MaxConcurrentStreams)
	c.mu.Unlock()
	if full {
		return c.writeRST(id, http2.ErrCodeRefusedStream)
	}
	m := c.s.methods[r.path]
	switch {
	case m == nil:
		return c.refuse(id, end, status.Newf(codes.Unimplemented, "unknown method %s", r.path))
	case r.encoding != "" && r.encoding != "identity":
		return c.refuse(id, end, status.Newf(codes.Unimplemented, "grpc-encoding %s is not supported", r.encoding))
	}
	st := &stream{c: c, id: id, m: m, method: r.path, notify: make(chan struct{}, 1), halfClosed: end}
	ctx := metadata.NewIncomingContext(c.ctx, r.md)
	ctx = grpc.NewContextWithServerTransportStream(ctx, transportStream{st})
	if r.timeout != "" {
		d, err := grpcwire.ParseTimeout(r.timeout)
		if err != nil {
			return c.refuse(id, end, status.New(codes.Internal, "grpcserver: "+err.Error()))
		}
		st.ctx, st.cancel = context.WithTimeout(ctx, d)
	} else {
		st.ctx, st.cancel = context.WithCancel(ctx)
	}
	if !c.s.track(nil, 1) {
		st.cancel()
		return c.writeRST(id, http2.ErrCodeRefusedStream)
	}
	// A writer waiting for a window returns when the stream's context ends.
	st.stopWake = context.AfterFunc(st.ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	c.mu.Lock()
	st.sendWin = c.initWin
	c.streams[id] = st
	c.mu.Unlock()
	go st.run()
	return nil
}

// refuse answers a stream with a status alone (trailers-only).
func (c *conn) refuse(id uint32, end bool, s *status.Status) error {
	if err := c.writeHeaders(id, statusFields(responseFields(nil), s, nil), true); err != nil {
		return err
	}
	if !end {
		return c.writeRST(id, http2.ErrCodeNo)
	}
	return nil
}

// data handles a DATA frame: its bytes join the stream's messages and
// are credited back to the client (the stream's only while the handler
// keeps up).
func (c *conn) data(flags http2.Flags, id uint32, p []byte) error {
	n := len(p)
	p, err := unpad(flags, p)
	if err != nil {
		return err
	}
	if id == 0 || id > c.maxStream {
		return connError{http2.ErrCodeProtocol, "DATA on an idle stream"}
	}
	var connCredit, streamCredit int
	c.mu.Lock()
	if c.credit += n; c.credit >= creditAt {
		connCredit, c.credit = c.credit, 0
	}
	var overrun bool
	if st := c.streams[id]; st != nil && !st.halfClosed && !st.reset {
		overrun = st.feed(p)
		if st.queued > queueLimit || st.blocked {
			st.withheld += n
		} else if st.credit += n; st.credit >= c.s.streamCreditAt() {
			streamCredit, st.credit = st.credit, 0
		}
		if flags.Has(http2.FlagDataEndStream) {
			st.halfClosed = true
		}
		st.wake()
	}
	c.mu.Unlock()
	if overrun {
		if err := c.writeWindowUpdates(connCredit, 0, 0); err != nil {
			return err
		}
		c.resetStream(id, http2.ErrCodeFlowControl)
		return nil
	}
	return c.writeWindowUpdates(connCredit, id, streamCredit)
}

// feed adds DATA bytes to the stream's messages; under conn.mu. It
// reports a client that sent more of a message waiting for admission than
// its window allowed.
func (st *stream) feed(p []byte) (overrun bool) {
	max := st.c.s.opts.MaxRecvSize
	for len(p) > 0 {
		if st.skip > 0 {
			n := min(st.skip, len(p))
			st.skip, p = st.skip-n, p[n:]
			continue
		}
		if st.msg == nil {
			n := copy(st.pre[st.npre:], p)
			st.npre, p = st.npre+n, p[n:]
			if st.npre < len(st.pre) {
				return false
			}
			st.npre = 0
			size := int(binary.BigEndian.Uint32(st.pre[1:]))
			switch {
			case st.pre[0] != 0:
				st.fail(status.Errorf(codes.Unimplemented, "grpcserver: compressed message without grpc-encoding"), size)
				continue
			case size > max:
				st.fail(status.Errorf(codes.ResourceExhausted, "grpcserver: received message larger than max (%d vs. %d)", size, max), size)
				continue
			case size == 0:
				st.enqueue([]byte{})
				continue
			}
			st.size = size
			if st.c.s.large(size) && !st.c.s.adm.admit(st, size) {
				st.blocked = true
				st.msg = make([]byte, 0, st.c.s.opts.StreamWindow)
			} else {
				st.msg = make([]byte, 0, size)
			}
		}
		n := min(st.size-len(st.msg), len(p))
		st.msg, p = append(st.msg, p[:n]...), p[n:]
		if st.blocked && len(st.msg) > st.c.s.opts.StreamWindow {
			st.msg = nil
			return true
		}
		if len(st.msg) == st.size {
			st.enqueue(st.msg)
			st.msg = nil
		}
	}
	return false
}

func (st *stream) fail(err error, skip int) {
	if st.recvErr == nil {
		st.recvErr = err
	}
	st.skip = skip
}

func (st *stream) enqueue(msg []byte) {
	st.queue = append(st.queue, msg)
	st.queued += 5 + len(msg)
}

// wake tells a waiting receiver that something changed; under conn.mu.
func (st *stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// resetByPeer ends a stream the client reset.
func (c *conn) resetByPeer(id uint32) {
	c.mu.Lock()
	st := c.streams[id]
	if st != nil {
		st.reset = true
		st.wake()
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if st != nil {
		st.cancel()
	}
}

// resetStream resets a stream with code.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.resetByPeer(id)
	c.writeRST(id, code)
}
