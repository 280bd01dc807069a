package grpcserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

const spiffeID = "spiffe://cluster.local/ns/default/sa/grpcserver"

// echoService is a test service: Echo (unary) returns its request, Chat
// (bidirectional) answers every message with Repeat copies of it, and Wait
// blocks until its context ends.
type echoService struct {
	// Repeat is how many answers Chat sends per message (1 if 0).
	Repeat int
	// seen receives each handler's context.
	seen chan context.Context
}

type echoHandler interface{ echo() *echoService }

func (e *echoService) echo() *echoService { return e }

var echoDesc = grpc.ServiceDesc{
	ServiceName: "skiff.test.Echo",
	HandlerType: (*echoHandler)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			srv.(echoHandler).echo().report(ctx)
			h := func(ctx context.Context, req any) (any, error) { return req, nil }
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/skiff.test.Echo/Echo"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			e := srv.(echoHandler).echo()
			e.report(ss.Context())
			for {
				in := new(wrapperspb.BytesValue)
				if err := ss.RecvMsg(in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				for range max(e.Repeat, 1) {
					if err := ss.SendMsg(in); err != nil {
						return err
					}
				}
			}
		}},
		{StreamName: "Wait", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(echoHandler).echo().report(ss.Context())
			<-ss.Context().Done()
			return status.FromContextError(ss.Context().Err()).Err()
		}},
	},
}

func (e *echoService) report(ctx context.Context) {
	if e.seen != nil {
		e.seen <- ctx
	}
}

// port is a server's TLS configuration and its client's, both nil on
// plaintext.
type port struct {
	name           string
	server, client *tls.Config
}

// ports returns a TLS port, with a workload certificate on each side, and
// a plaintext one.
func ports(t testing.TB) []port {
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	return []port{{"tls", serverTLS, clientTLS}, {"plaintext", nil, nil}}
}

// envoyWindows are the 256 MiB windows Envoy's HTTP/2 client opens by
// default, and Istio's agent's large ones: a large answer is not held
// back by the client's flow control.
var envoyWindows = []grpc.DialOption{grpc.WithInitialWindowSize(256 << 20), grpc.WithInitialConnWindowSize(256 << 20)}

// serve starts s on a loopback listener and stops it when the test ends.
func serve(t testing.TB, s *grpcserver.Server) string {
	t.Helper()
	lis := listen(t)
	serveOn(t, s, lis)
	return lis.Addr().String()
}

// serveCounted serves s as serve does, counting the writes to its
// connections.
func serveCounted(t testing.TB, s *grpcserver.Server) (string, *countingListener) {
	t.Helper()
	counted := &countingListener{Listener: listen(t)}
	serveOn(t, s, counted)
	return counted.Addr().String(), counted
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// serveOn serves s on lis until the test ends.
func serveOn(t testing.TB, s *grpcserver.Server, lis net.Listener) {
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; !errors.Is(err, grpcserver.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
}

// dial connects a grpc-go client, with TLS when cfg is set.
func dial(t testing.TB, addr string, cfg *tls.Config, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

var chatDesc = &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}

func chat(t testing.TB, ctx context.Context, cc *grpc.ClientConn) grpc.ClientStream {
	t.Helper()
	cs, err := cc.NewStream(ctx, chatDesc, "/skiff.test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("status %v (%v), want %v", got, err, want)
	}
}

// writeRequest writes SETTINGS, then on stream 1 a request for path and a
// BytesValue "hi", ending the stream when end is set.
func writeRequest(fr *http2.Framer, path string, end bool) {
	fr.WriteSettings()
	writeHeaders(fr, path)
	// A BytesValue of "hi": field 1, length 2.
	fr.WriteData(1, end, []byte{0, 0, 0, 0, 4, 0x0a, 2, 'h', 'i'})
}

// writeHeaders opens stream 1 with a gRPC request's headers for path.
func writeHeaders(fr *http2.Framer, path string) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
}

// countingListener counts the writes to the connections it accepts, and
// those of more than 1 KiB (frames of a message, not credits or pings).
type countingListener struct {
	net.Listener
	writes, large atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.l.writes.Add(1)
	if len(b) > 1024 {
		c.l.large.Add(1)
	}
	return c.Conn.Write(b)
}
