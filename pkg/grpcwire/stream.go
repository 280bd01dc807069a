package grpcwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
)

// ClientStream is the client's side of one RPC. Send and Recv may be called
// from different goroutines, but neither from two at once; CloseSend not
// concurrently with Send. A stream holds resources until Recv has returned
// an error, its context is done or its Conn is closed.
type ClientStream interface {
	// Send writes one message, blocking while HTTP/2 flow control holds it.
	// Once the stream has ended it returns io.EOF, and Recv tells why;
	// when the caller's context or Conn ended it, it returns that status.
	Send(msg []byte) error
	// CloseSend half-closes the stream: the server's Recv sees io.EOF.
	CloseSend() error
	// Recv returns the next message; io.EOF when the server ended the RPC
	// with OK, and a *Status otherwise (Unavailable when the connection
	// failed, Canceled when the context was canceled).
	Recv() ([]byte, error)
}

type clientStream struct {
	c      *Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	pw     *io.PipeWriter
	stop   func() bool // releases the context.AfterFunc that Close fires

	sendMu     sync.Mutex
	sendClosed bool
	fw         frameWriter

	ready chan struct{} // closed when RoundTrip has returned
	resp  *http.Response
	rtErr error

	checked bool          // the response's headers were checked
	ended   chan struct{} // closed when Recv has its final result
	final   error         // io.EOF or *Status, set before ended closes
	rhdr    [headerLen]byte
}

var _ ClientStream = (*clientStream)(nil)

// NewStream starts an RPC to method ("/pkg.Service/Method"), with md as
// extra key, value pairs of metadata. It returns at once, without waiting
// for the server's response headers (grpc-go servers send them only with
// their first message). The stream ends when ctx does.
func (c *Conn) NewStream(ctx context.Context, method string, md ...string) (ClientStream, error) {
	if !strings.HasPrefix(method, "/") {
		return nil, Errorf(Internal, "grpcwire: method %q does not start with /", method)
	}
	if err := ctx.Err(); err != nil {
		return nil, statusOf(err)
	}
	h, err := c.requestHeader(ctx, md)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.pending.Add(1)
	}
	c.mu.Unlock()
	if closed {
		return nil, errConnClosed
	}
	sctx, cancel := context.WithCancelCause(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, c.base+method, pr)
	if err != nil {
		cancel(nil)
		c.pending.Done()
		return nil, Errorf(Internal, "grpcwire: request for %s: %v", method, err)
	}
	req.Header = h
	req.ContentLength = -1
	s := &clientStream{
		c: c, ctx: sctx, cancel: cancel, pw: pw,
		ready: make(chan struct{}), ended: make(chan struct{}),
	}
	s.stop = context.AfterFunc(c.ctx, func() { cancel(errConnClosed) })
	// Unblock a Send that the transport is not reading for.
	context.AfterFunc(sctx, func() { pr.CloseWithError(s.ctxStatus()) })
	go func() {
		defer c.pending.Done()
		if release := c.gate(sctx); release != nil {
			req = req.WithContext(httptrace.WithClientTrace(sctx, &httptrace.ClientTrace{
				GotConn: func(httptrace.GotConnInfo) { release() },
			}))
			defer release()
		}
		resp, err := c.tr.RoundTrip(req)
		s.resp, s.rtErr = resp, err
		if err != nil {
			pr.CloseWithError(err)
		}
		close(s.ready)
	}()
	return s, nil
}

// ctxStatus is the status of a stream whose context is done.
func (s *clientStream) ctxStatus() *Status {
	if st := (*Status)(nil); errors.As(context.Cause(s.ctx), &st) {
		return st
	}
	return statusOf(s.ctx.Err())
}

func (s *clientStream) Send(msg []byte) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sendClosed {
		return Errorf(Internal, "grpcwire: Send after CloseSend")
	}
	err := s.fw.write(s.pw, msg)
	if err == nil || errors.As(err, new(*Status)) {
		return err
	}
	select {
	case <-s.ended:
		return io.EOF
	default:
	}
	if s.ctx.Err() != nil {
		return s.ctxStatus()
	}
	return io.EOF // the transport stopped sending: Recv has the status
}

func (s *clientStream) CloseSend() error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if !s.sendClosed {
		s.sendClosed = true
		s.pw.Close()
	}
	return nil
}

func (s *clientStream) Recv() ([]byte, error) {
	if s.final != nil {
		return nil, s.final
	}
	<-s.ready
	if s.rtErr != nil {
		return nil, s.finish(s.transportStatus(s.rtErr))
	}
	if !s.checked {
		s.checked = true
		if st := responseStatus(s.resp); st != nil {
			return nil, s.finish(st)
		}
	}
	msg, err := readFrame(s.resp.Body, &s.rhdr, s.c.maxRecv)
	var st *Status
	switch {
	case err == nil:
		return msg, nil
	case err == io.EOF:
		t := s.resp.Trailer
		return nil, s.finish(parseStatus(t.Get("Grpc-Status"), t.Get("Grpc-Message")))
	case errors.As(err, &st):
		return nil, s.finish(st)
	}
	return nil, s.finish(s.transportStatus(err))
}

// transportStatus is the status of a stream that net/http failed.
func (s *clientStream) transportStatus(err error) *Status {
	if s.ctx.Err() != nil {
		return s.ctxStatus()
	}
	if st := streamResetStatus(s.ctx, err); st != nil {
		return st
	}
	return &Status{Code: Unavailable, Message: "grpcwire: " + err.Error()}
}

// finish records the stream's final result and releases the stream: its
// context is canceled, which resets it if the server has not ended it.
func (s *clientStream) finish(st *Status) error {
	s.final = st
	if st.Code == OK {
		s.final = io.EOF
	}
	close(s.ended)
	s.stop()
	s.cancel(s.final)
	if s.resp != nil {
		s.resp.Body.Close()
	}
	return s.final
}

// responseStatus checks a response's headers: a non-gRPC response maps to a
// status by its HTTP status code, and a trailers-only response carries its
// status in the headers. It returns nil for a response with messages to read.
func responseStatus(resp *http.Response) *Status {
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode != http.StatusOK || !IsGRPC(ct) {
		code := Unknown
		if resp.StatusCode != http.StatusOK {
			code = httpCode(resp.StatusCode)
		}
		return &Status{Code: code, Message: fmt.Sprintf(
			"grpcwire: unexpected HTTP response: status %d (%s), content-type %q",
			resp.StatusCode, http.StatusText(resp.StatusCode), ct)}
	}
	if v := resp.Header.Get("Grpc-Status"); v != "" {
		return parseStatus(v, resp.Header.Get("Grpc-Message"))
	}
	return nil
}
