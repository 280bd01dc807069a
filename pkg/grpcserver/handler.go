package grpcserver

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// run is a stream's handler goroutine.
func (st *stream) run() {
	defer st.c.s.wg.Done()
	var err error
	if u := st.m.unary; u != nil {
		err = st.runUnary(u)
	} else {
		d := st.m.stream
		if icpt := st.c.s.opts.StreamInterceptor; icpt != nil {
			info := &grpc.StreamServerInfo{FullMethod: st.method, IsClientStream: d.ClientStreams, IsServerStream: d.ServerStreams}
			err = icpt(st.m.srv, st, info, d.Handler)
		} else {
			err = d.Handler(st.m.srv, st)
		}
	}
	st.finish(err)
}

func (st *stream) runUnary(u *grpc.MethodDesc) error {
	msg, err := st.recv()
	if err == io.EOF {
		return status.Error(codes.Internal, "grpcserver: the client sent no request")
	}
	if err != nil {
		return err
	}
	dec := func(v any) error { return st.unmarshal(msg, v) }
	resp, err := u.Handler(st.m.srv, st.ctx, dec, st.c.s.opts.UnaryInterceptor)
	if err != nil {
		return err
	}
	// The answer and its status go out together.
	return st.send(resp, statusFields(nil, status.New(codes.OK, ""), st.trailer))
}

func (st *stream) unmarshal(msg []byte, v any) error {
	if err := st.c.s.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v); err != nil {
		return status.Errorf(codes.Internal, "grpcserver: error unmarshalling request: %v", err)
	}
	return nil
}

// finish ends the stream with the handler's status, unless it was reset.
func (st *stream) finish(err error) {
	c := st.c
	c.mu.Lock()
	reset, halfClosed, closed := st.reset, st.halfClosed, c.closed
	c.mu.Unlock()
	if st.sentTrailers && err == nil {
		reset = true // the status went out with the answer
	}
	if !reset && !closed {
		var fields []hpack.HeaderField
		if !st.sentHeader {
			fields = responseFields(st.header)
		}
		if c.writeHeaders(st.id, statusFields(fields, statusOf(err, st.ctx), st.trailer), true) == nil && !halfClosed {
			// As grpc-go: the client's side is closed for it.
			c.writeRST(st.id, http2.ErrCodeNo)
		}
	}
	c.mu.Lock()
	delete(c.streams, st.id)
	st.reset, st.done = true, true
	held, blocked := st.held(), st.blocked
	st.queue, st.msg = nil, nil
	idle := c.goingAway && len(c.streams) == 0
	c.mu.Unlock()
	if blocked {
		c.s.adm.forget(st)
	}
	c.s.release(held)
	st.stopWake()
	st.cancel()
	if idle {
		c.close(errors.New("going away"))
	}
}

func statusOf(err error, ctx context.Context) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err())
	}
	return status.New(codes.Unknown, err.Error())
}

// responseFields are the response headers, with the handler's metadata.
func responseFields(md metadata.MD) []hpack.HeaderField {
	f := []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}}
	return appendMD(f, md)
}

// statusFields appends the status and the handler's trailers.
func statusFields(f []hpack.HeaderField, s *status.Status, trailer metadata.MD) []hpack.HeaderField {
	f = append(f, hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(s.Code()))})
	if m := s.Message(); m != "" {
		f = append(f, hpack.HeaderField{Name: "grpc-message", Value: grpcwire.EncodeMessage(m)})
	}
	return appendMD(f, trailer)
}

func appendMD(f []hpack.HeaderField, md metadata.MD) []hpack.HeaderField {
	for k, vs := range md {
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			f = append(f, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return f
}

// recv returns the next message, io.EOF once the client ended its side,
// or the error that ended the stream.
func (st *stream) recv() ([]byte, error) {
	c := st.c
	for {
		c.mu.Lock()
		if len(st.queue) > 0 {
			msg := st.queue[0]
			st.queue[0] = nil
			if st.queue = st.queue[1:]; len(st.queue) == 0 {
				st.queue = nil
			}
			st.queued -= 5 + len(msg)
			if st.withheld > 0 && st.queued <= queueLimit && !st.blocked {
				st.credit, st.withheld = st.credit+st.withheld, 0
			}
			var credit int
			if st.credit >= st.c.s.streamCreditAt() && !st.halfClosed {
				credit, st.credit = st.credit, 0
			}
			c.mu.Unlock()
			if c.s.large(len(msg)) {
				c.s.release(len(msg))
			}
			if credit > 0 {
				c.writeWindowUpdate(st.id, credit)
			}
			return msg, nil
		}
		err := st.recvErr
		switch {
		case err != nil:
		case st.reset:
			err = status.Error(codes.Canceled, "grpcserver: the client reset the stream")
		case st.halfClosed:
			err = io.EOF
		}
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-st.notify:
		case <-st.ctx.Done():
			return nil, status.FromContextError(st.ctx.Err()).Err()
		}
	}
}

// Context is done when the client cancels, the connection closes, the
// client's deadline passes or the server stops.
func (st *stream) Context() context.Context { return st.ctx }

func (st *stream) RecvMsg(m any) error {
	msg, err := st.recv()
	if err != nil {
		return err
	}
	return st.unmarshal(msg, m)
}

func (st *stream) SendMsg(m any) error { return st.send(m, nil) }

// send writes a message, and trailers after it when given.
func (st *stream) send(m any, trailers []hpack.HeaderField) error {
	data, err := st.c.s.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpcserver: error marshalling response: %v", err)
	}
	defer data.Free()
	return st.c.writeMessage(st, data, trailers)
}

func (st *stream) SetHeader(md metadata.MD) error {
	if st.sentHeader {
		return status.Error(codes.Internal, "grpcserver: headers already sent")
	}
	st.header = metadata.Join(st.header, md)
	return nil
}

func (st *stream) SendHeader(md metadata.MD) error {
	if err := st.SetHeader(md); err != nil {
		return err
	}
	st.sentHeader = true
	return st.c.writeHeaders(st.id, responseFields(st.header), false)
}

func (st *stream) SetTrailer(md metadata.MD) { st.trailer = metadata.Join(st.trailer, md) }

// transportStream gives grpc.SetHeader and friends the stream.
type transportStream struct{ st *stream }

func (t transportStream) Method() string                  { return t.st.method }
func (t transportStream) SetHeader(md metadata.MD) error  { return t.st.SetHeader(md) }
func (t transportStream) SendHeader(md metadata.MD) error { return t.st.SendHeader(md) }
func (t transportStream) SetTrailer(md metadata.MD) error { t.st.SetTrailer(md); return nil }
