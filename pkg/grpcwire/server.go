package grpcwire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Handler serves one RPC. The error it returns becomes the RPC's status: nil
// is OK, a *Status is sent as it is, and any other error is Unknown. A
// handler must return once its stream's Context is done.
type Handler func(ServerStream) error

// ServerStream is the server's side of one RPC. Send and Recv may be called
// from different goroutines, but neither from two at once.
type ServerStream interface {
	// Context is done when the client cancels, the connection closes, the
	// client's deadline (grpc-timeout) passes or the server stops.
	Context() context.Context
	// Metadata returns the values of a request header, e.g. "authorization".
	Metadata(key string) []string
	// Recv returns the next message, or io.EOF once the client half-closed.
	Recv() ([]byte, error)
	// Send writes and flushes one message.
	Send(msg []byte) error
}

// Server serves registered methods over HTTP/2 without TLS (prior
// knowledge), as Envoy and grpc-go clients speak on Unix sockets.
type Server struct {
	// MaxRecvSize is the largest message a handler receives; 0 means
	// 256 MiB. A larger message fails Recv with ResourceExhausted. Set it
	// before Serve.
	MaxRecvSize int

	log *slog.Logger

	mu      sync.Mutex
	methods map[string]Handler
}

// handlers counts the handlers one Serve call runs, so that it returns only
// after they have.
type handlers struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// start counts a handler in, unless Serve is already stopping.
func (hs *handlers) start() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.stopped {
		return false
	}
	hs.wg.Add(1)
	return true
}

// stop refuses further handlers and waits for the running ones.
func (hs *handlers) stop() {
	hs.mu.Lock()
	hs.stopped = true
	hs.mu.Unlock()
	hs.wg.Wait()
}

// NewServer returns a server with no methods.
func NewServer(log *slog.Logger) *Server {
	return &Server{log: log.With("component", "grpcwire"), methods: map[string]Handler{}}
}

// Handle registers h for method, spelled "/pkg.Service/Method". A method
// without a handler answers Unimplemented.
func (s *Server) Handle(method string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods[method] = h
}

// Serve serves connections accepted on ln until ctx ends, then closes ln and
// every connection, which ends every stream's Context, and returns nil once
// every handler has returned. It returns ln's error if ln fails first.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var hs handlers
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveHTTP(&hs, w, r) }),
		Protocols:   &protocols,
		BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	err := srv.Serve(ln)
	stop()
	// Connections close before the streams' contexts are canceled, so a
	// client sees its connection drop rather than a Canceled status.
	srv.Close()
	cancel()
	hs.stop()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// IsGRPC reports whether a content type is gRPC's: application/grpc, alone
// or with a "+codec" or ";parameters" suffix.
func IsGRPC(contentType string) bool {
	rest, ok := strings.CutPrefix(contentType, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

func (s *Server) serveHTTP(hs *handlers, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "grpcwire: gRPC requires POST", http.StatusMethodNotAllowed)
		return
	}
	if !IsGRPC(r.Header.Get("Content-Type")) {
		http.Error(w, "grpcwire: content-type is not application/grpc", http.StatusUnsupportedMediaType)
		return
	}
	if !hs.start() {
		writeStatus(w, false, &Status{Code: Unavailable, Message: "grpcwire: server is stopping"})
		return
	}
	defer hs.wg.Done()
	s.mu.Lock()
	h := s.methods[r.URL.Path]
	s.mu.Unlock()
	if h == nil {
		writeStatus(w, false, &Status{Code: Unimplemented, Message: "grpcwire: unknown method " + r.URL.Path})
		return
	}
	if enc := r.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		w.Header().Set("Grpc-Accept-Encoding", "identity")
		writeStatus(w, false, &Status{Code: Unimplemented, Message: "grpcwire: grpc-encoding " + enc + " is not supported"})
		return
	}
	ctx := r.Context()
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		d, err := ParseTimeout(v)
		if err != nil {
			writeStatus(w, false, &Status{Code: Internal, Message: "grpcwire: " + err.Error()})
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	max := s.MaxRecvSize
	if max <= 0 {
		max = defaultMaxRecvSize
	}
	st := &serverStream{ctx: ctx, w: w, rc: http.NewResponseController(w), r: r, max: max}
	err := h(st)
	if err != nil && ctx.Err() != nil && !errors.As(err, new(*Status)) {
		err = ctx.Err()
	}
	writeStatus(w, st.sentHeader, statusOf(err))
}

// writeStatus ends a response with st: in trailers after messages, or as a
// trailers-only response (status in the headers) when nothing was sent.
func writeStatus(w http.ResponseWriter, sentHeader bool, st *Status) {
	h := w.Header()
	prefix := ""
	if sentHeader {
		prefix = http.TrailerPrefix
	} else {
		setResponseHeader(h)
		// Nothing follows the headers: no Content-Length either.
		h["Content-Length"] = nil
	}
	h[prefix+"Grpc-Status"] = []string{strconv.FormatUint(uint64(st.Code), 10)}
	if st.Message != "" {
		h[prefix+"Grpc-Message"] = []string{EncodeMessage(st.Message)}
	}
	if !sentHeader {
		w.WriteHeader(http.StatusOK)
	}
}

func setResponseHeader(h http.Header) {
	h["Content-Type"] = []string{"application/grpc"}
	h["Date"] = nil // gRPC has no use for it; nil keeps net/http from adding it
}

type serverStream struct {
	ctx        context.Context
	w          http.ResponseWriter
	rc         *http.ResponseController
	r          *http.Request
	max        int
	sentHeader bool
	rhdr       [headerLen]byte
	fw         frameWriter
}

var _ ServerStream = (*serverStream)(nil)

func (st *serverStream) Context() context.Context { return st.ctx }

func (st *serverStream) Metadata(key string) []string { return st.r.Header.Values(key) }

func (st *serverStream) Recv() ([]byte, error) {
	msg, err := readFrame(st.r.Body, &st.rhdr, st.max)
	if err == nil || err == io.EOF || errors.As(err, new(*Status)) {
		return msg, err
	}
	if st.ctx.Err() != nil {
		return nil, statusOf(st.ctx.Err())
	}
	return nil, &Status{Code: Canceled, Message: "grpcwire: receiving: " + err.Error()}
}

func (st *serverStream) Send(msg []byte) error {
	if !st.sentHeader {
		setResponseHeader(st.w.Header())
		st.w.WriteHeader(http.StatusOK)
		st.sentHeader = true
	}
	err := st.fw.write(st.w, msg)
	if err == nil {
		err = st.rc.Flush()
	}
	if err == nil || errors.As(err, new(*Status)) {
		return err
	}
	if st.ctx.Err() != nil {
		return statusOf(st.ctx.Err())
	}
	return &Status{Code: Unavailable, Message: "grpcwire: sending: " + err.Error()}
}
