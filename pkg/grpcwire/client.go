package grpcwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DialOptions configures a Conn.
type DialOptions struct {
	// TLS, if set, secures the connection with ALPN "h2"; it is cloned.
	// Without it the connection is plaintext HTTP/2 with prior knowledge.
	TLS *tls.Config
	// Dial opens the connection, e.g. to a Unix socket; nil dials TCP to
	// the address. With TLS, the handshake runs on the connection it returns.
	Dial func(ctx context.Context) (net.Conn, error)
	// Metadata returns headers to send with every RPC, e.g. authorization.
	// It is called for every RPC; an error fails the RPC (Unauthenticated,
	// unless it is a *Status).
	Metadata func(ctx context.Context) (map[string]string, error)
	// MaxRecvSize is the largest message accepted; 0 means 256 MiB. A larger
	// message fails the RPC with ResourceExhausted.
	MaxRecvSize int
	// Authority is the :authority of every request; it defaults to the
	// address, or "localhost" without one.
	Authority string
}

// Conn is a client of one gRPC server, over as many HTTP/2 connections as its
// streams need. It is safe for concurrent use.
type Conn struct {
	tr        *http.Transport
	base      string // scheme://authority, the prefix of every request URL
	authority string
	dial      func(ctx context.Context) (net.Conn, error)
	metadata  func(ctx context.Context) (map[string]string, error)
	maxRecv   int

	ctx    context.Context // canceled by Close, with errConnClosed
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	conns   map[*trackedConn]struct{}
	dialing chan struct{}  // while an RPC opens the first connection: closed once it has
	pending sync.WaitGroup // RoundTrip goroutines
}

// errConnClosed is the status of streams that Close ends.
var errConnClosed = &Status{Code: Canceled, Message: "grpcwire: the connection is closing"}

// Dial returns a Conn to the server at addr. It does no I/O: connections
// are opened by the first RPC that needs one.
func Dial(addr string, o DialOptions) (*Conn, error) {
	if addr == "" && o.Dial == nil {
		return nil, errors.New("grpcwire: dial: no address and no Dial function")
	}
	if o.MaxRecvSize < 0 {
		return nil, fmt.Errorf("grpcwire: dial: MaxRecvSize %d is negative", o.MaxRecvSize)
	}
	authority := o.Authority
	if authority == "" {
		authority = addr
	}
	if authority == "" || o.Dial != nil && o.Authority == "" && strings.Contains(authority, "/") {
		authority = "localhost"
	}
	if strings.ContainsAny(authority, "/?#@ \t\r\n") {
		return nil, fmt.Errorf("grpcwire: dial: authority %q is not host[:port]", authority)
	}
	c := &Conn{
		authority: authority,
		dial:      o.Dial,
		metadata:  o.Metadata,
		maxRecv:   o.MaxRecvSize,
		conns:     map[*trackedConn]struct{}{},
	}
	if c.maxRecv == 0 {
		c.maxRecv = defaultMaxRecvSize
	}
	if c.dial == nil {
		var d net.Dialer
		c.dial = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	var protocols http.Protocols
	c.tr = &http.Transport{
		Protocols:          &protocols,
		DialContext:        c.dialContext,
		DisableCompression: true, // no Accept-Encoding: gzip on gRPC requests
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		cfg.NextProtos = []string{"h2"}
		if cfg.ServerName == "" {
			cfg.ServerName = authority
			if host, _, err := net.SplitHostPort(authority); err == nil {
				cfg.ServerName = host
			}
		}
		c.tr.TLSClientConfig = cfg
		protocols.SetHTTP2(true)
		c.base = "https://" + authority
	} else {
		protocols.SetUnencryptedHTTP2(true)
		c.base = "http://" + authority
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	return c, nil
}

// trackedConn is a connection the transport opened, so Close can end it
// even while streams are still being torn down.
type trackedConn struct {
	net.Conn
	c    *Conn
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.c.mu.Lock()
		delete(t.c.conns, t)
		t.c.mu.Unlock()
	})
	return t.Conn.Close()
}

func (c *Conn) dialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	t := &trackedConn{Conn: nc, c: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return nil, errConnClosed
	}
	c.conns[t] = struct{}{}
	return t, nil
}

// gate holds an RPC back while another opens the first connection, so RPCs
// that start together share one HTTP/2 connection instead of each dialing
// its own (net/http dials per request until one connection is pooled). It
// returns the release an RPC that became the dialer calls once it has a
// connection or has failed, and nil for one that may go ahead.
func (c *Conn) gate(ctx context.Context) func() {
	for {
		c.mu.Lock()
		if c.dialing == nil {
			if len(c.conns) > 0 {
				c.mu.Unlock()
				return nil
			}
			ch := make(chan struct{})
			c.dialing = ch
			c.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					c.mu.Lock()
					c.dialing = nil
					c.mu.Unlock()
					close(ch)
				})
			}
		}
		ch := c.dialing
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// Close ends every stream (their Recv returns Canceled) and closes every
// connection. It returns once the streams' goroutines have.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel(errConnClosed)
	c.pending.Wait()
	c.tr.CloseIdleConnections()
	c.mu.Lock()
	conns := make([]*trackedConn, 0, len(c.conns))
	for t := range c.conns {
		conns = append(conns, t)
	}
	c.mu.Unlock()
	for _, t := range conns {
		t.Close()
	}
	return nil
}

// Invoke runs a unary RPC: one request message, one response message.
func (c *Conn) Invoke(ctx context.Context, method string, req []byte, md ...string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.NewStream(ctx, method, md...)
	if err != nil {
		return nil, err
	}
	if err := s.Send(req); err != nil && err != io.EOF {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	resp, err := s.Recv()
	if err == io.EOF {
		return nil, Errorf(Internal, "grpcwire: %s: the server sent no response message", method)
	}
	if err != nil {
		return nil, err
	}
	switch _, err := s.Recv(); err {
	case io.EOF:
		return resp, nil
	case nil:
		return nil, Errorf(Internal, "grpcwire: %s: the server sent more than one response message", method)
	default:
		return nil, err
	}
}

// requestHeader builds the headers of an RPC, or the status that fails it.
func (c *Conn) requestHeader(ctx context.Context, md []string) (http.Header, error) {
	if len(md)%2 != 0 {
		return nil, Errorf(Internal, "grpcwire: metadata %q is not key, value pairs", md)
	}
	h := make(http.Header, 4+len(md)/2)
	h["Content-Type"] = []string{"application/grpc"}
	h["Te"] = []string{"trailers"}
	h["User-Agent"] = []string{"grpcwire"}
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, &Status{Code: DeadlineExceeded, Message: context.DeadlineExceeded.Error()}
		}
		h["Grpc-Timeout"] = []string{encodeTimeout(d)}
	}
	if c.metadata != nil {
		m, err := c.metadata(ctx)
		if err != nil {
			if st := (*Status)(nil); errors.As(err, &st) {
				return nil, st
			}
			return nil, Errorf(Unauthenticated, "grpcwire: per-RPC metadata: %v", err)
		}
		for k, v := range m {
			h.Add(k, v)
		}
	}
	for i := 0; i < len(md); i += 2 {
		h.Add(md[i], md[i+1])
	}
	return h, nil
}
