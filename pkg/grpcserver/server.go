// Package grpcserver serves grpc-go service descriptors over HTTP/2 with
// one goroutine per connection, for a server whose clients are thousands of
// mostly idle, long-lived streams: istiod's sidecars on its TLS port.
//
// grpc-go's server keeps four goroutines per connection (a frame reader, a
// writer, a keepalive loop and the stream's handler) and a transport of
// about 10 KiB; at 1000 sidecars that is most of istiod's memory at rest
// (docs/benchmarks.md, istiod xDS). Here a connection is one reader
// goroutine; writes go out on the goroutine that sends, up to four frames
// in one write (cork.go) under the connection's write lock and the peer's
// flow-control windows;
// keepalive and connection age are timers; each stream's handler runs on a
// goroutine of its own, as grpc-go's do, with the services' own handlers,
// codec and stream interceptor. Messages larger than a stream's window are
// let in within a receive budget shared by the connections (admit.go), so
// that thousands of clients sending large requests at once, as sidecars do
// when istiod restarts, wait in line with their windows withheld instead
// of all sitting received in memory.
//
// What it serves: unary and streaming methods, TLS (ALPN h2) or plaintext
// HTTP/2 with prior knowledge, grpc-timeout, metadata (binary "-bin" values
// included), statuses in trailers or trailers-only, RST_STREAM both ways,
// keepalive pings and their enforcement, and GOAWAY at a connection's
// maximum age. Not served: compression (a compressed request is refused
// with Unimplemented), status details, server push.
package grpcserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"

	"github.com/skiff-mesh/skiff/pkg/tlsrecord"
)

// Options configures a Server.
type Options struct {
	// TLS, if set, is the server's TLS configuration ("h2" is added to its
	// NextProtos); nil serves plaintext HTTP/2 with prior knowledge.
	TLS *tls.Config
	// Codec encodes and decodes messages; nil is grpc-go's "proto" codec.
	Codec encoding.CodecV2
	// StreamInterceptor wraps every streaming handler; UnaryInterceptor
	// every unary one.
	StreamInterceptor grpc.StreamServerInterceptor
	UnaryInterceptor  grpc.UnaryServerInterceptor
	// Keepalive: pings after Time without reads, closing the connection
	// when none is answered within Timeout; GOAWAY after MaxConnectionAge
	// (with grpc-go's 10 % jitter) and closing MaxConnectionAgeGrace later.
	// MaxConnectionIdle is not implemented.
	Keepalive keepalive.ServerParameters
	// Enforcement ends connections whose client pings more often than
	// MinTime (after two strikes, as grpc-go does). PermitWithoutStream is
	// not read: pings without streams are allowed, as Istio sets it.
	Enforcement keepalive.EnforcementPolicy
	// MaxRecvSize bounds a received message; 0 means 4 MiB.
	MaxRecvSize int
	// MaxConcurrentStreams is advertised and enforced per connection; 0
	// means 100.
	MaxConcurrentStreams uint32
	// HandshakeTimeout bounds a TLS handshake; 0 means 120 s as grpc-go.
	HandshakeTimeout time.Duration
	// StreamWindow is each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE),
	// from 1 KiB to HTTP/2's default 64 KiB, which 0 means. A client sends no
	// more than the window before it is credited, so a small window keeps its
	// TLS records small, and with them the buffer crypto/tls keeps for the
	// connection's life (it grows to the largest record received).
	StreamWindow int
	// RecvBudget bounds the bytes of messages larger than StreamWindow
	// that the server holds received and not yet taken by their handlers,
	// across its connections. A stream whose message does not fit waits,
	// its window withheld, until earlier ones are taken; a message larger
	// than the budget is let in alone. 0 means 16 MiB.
	RecvBudget int
	Log        *slog.Logger
}

// Server serves registered services on the listeners given to Serve.
type Server struct {
	opts  Options
	codec encoding.CodecV2
	log   *slog.Logger

	methods map[string]*method // by "/service/Method"; set before Serve
	adm     admission

	mu      sync.Mutex
	stopped bool
	lis     map[net.Listener]struct{}
	raw     map[net.Conn]struct{} // in their TLS handshake
	conns   map[*conn]struct{}
	wg      sync.WaitGroup // connections and their handlers
}

// method is one registered method: a stream or a unary handler.
type method struct {
	srv     any
	service string
	stream  *grpc.StreamDesc
	unary   *grpc.MethodDesc
}

// ErrServerStopped is returned by Serve once Stop was called.
var ErrServerStopped = errors.New("grpcserver: the server was stopped")

// New returns a server with no services.
func New(o Options) *Server {
	if o.MaxRecvSize <= 0 {
		o.MaxRecvSize = 4 << 20
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 100
	}
	if o.StreamWindow <= 0 || o.StreamWindow > initialWindow {
		o.StreamWindow = initialWindow
	}
	o.StreamWindow = max(o.StreamWindow, 1024)
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 120 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.TLS != nil {
		o.TLS = o.TLS.Clone()
		if !slices.Contains(o.TLS.NextProtos, "h2") {
			o.TLS.NextProtos = append([]string{"h2"}, o.TLS.NextProtos...)
		}
	}
	codec := o.Codec
	if codec == nil {
		codec = encoding.GetCodecV2("proto")
	}
	if o.RecvBudget <= 0 {
		o.RecvBudget = 16 << 20
	}
	return &Server{opts: o, codec: codec, log: o.Log.With("component", "grpcserver"),
		methods: map[string]*method{}, adm: admission{budget: o.RecvBudget, free: o.RecvBudget},
		lis: map[net.Listener]struct{}{}, raw: map[net.Conn]struct{}{}, conns: map[*conn]struct{}{}}
}

// RegisterService registers a service and its implementation, as
// grpc.Server does; it must be called before Serve.
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	for i := range sd.Methods {
		s.methods["/"+sd.ServiceName+"/"+sd.Methods[i].MethodName] = &method{srv: impl, service: sd.ServiceName, unary: &sd.Methods[i]}
	}
	for i := range sd.Streams {
		s.methods["/"+sd.ServiceName+"/"+sd.Streams[i].StreamName] = &method{srv: impl, service: sd.ServiceName, stream: &sd.Streams[i]}
	}
}

// Serve accepts connections on lis until Stop, and returns
// ErrServerStopped then, or the listener's error.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	s.lis[lis] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("grpcserver: accept: %w", err)
		}
		delay = 0
		if !s.trackRaw(nc) {
			nc.Close()
			return ErrServerStopped
		}
		go s.handshake(nc)
	}
}

// track counts a connection or a handler in (n = 1) unless the server is
// stopping, and registers c when it is not nil.
func (s *Server) track(c *conn, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(n)
	if c != nil {
		s.conns[c] = struct{}{}
	}
	return true
}

// trackRaw counts in a connection before its handshake, so that Stop
// closes it.
func (s *Server) trackRaw(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	s.raw[nc] = struct{}{}
	return true
}

// handshake runs the TLS handshake on a goroutine that then ends, so the
// deep stack of a certificate check does not stay with the connection,
// and starts the connection's reader.
func (s *Server) handshake(nc net.Conn) {
	raw := nc
	defer func() {
		s.mu.Lock()
		delete(s.raw, raw)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if ka := s.opts.Keepalive; ka.Time > 0 {
		setUserTimeout(nc, cmp.Or(ka.Timeout, 20*time.Second))
	}
	var authInfo credentials.AuthInfo
	sock := &corkConn{Conn: nc}
	framed := net.Conn(sock)
	if s.opts.TLS != nil {
		// Reads that stop at each record's end: tls.Conn's own buffer then
		// holds one record (pkg/tlsrecord).
		sock.Conn = tlsrecord.NewConn(nc)
		tc := tls.Server(sock, s.opts.TLS)
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Debug("TLS handshake failed", "peer", nc.RemoteAddr().String(), "err", err)
			nc.Close()
			return
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			s.log.Debug("TLS connection without ALPN h2", "peer", nc.RemoteAddr().String(), "protocol", p)
			tc.Close()
			return
		}
		authInfo = tlsInfo(tc.ConnectionState())
		framed = tc
	}
	c := newConn(s, framed, sock, authInfo)
	if !s.track(c, 1) {
		nc.Close()
		return
	}
	go c.serve()
}

// Stop closes the listeners and every connection, which ends every
// stream's context, and returns once every handler has returned.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	for l := range s.lis {
		l.Close()
	}
	for nc := range s.raw {
		nc.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(errors.New("server stopped"))
	}
	s.wg.Wait()
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}
