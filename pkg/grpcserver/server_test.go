package grpcserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGRPCGoClient: grpc-go's client calls a unary method and a streaming
// one of grpc-go's own health service, over TLS and plaintext.
func TestGRPCGoClient(t *testing.T) {
	for _, tc := range ports(t) {
		t.Run(tc.name, func(t *testing.T) {
			s := grpcserver.New(grpcserver.Options{TLS: tc.server})
			hs := health.NewServer()
			healthpb.RegisterHealthServer(s, hs)
			cc := dial(t, serve(t, s), tc.client)
			hc := healthpb.NewHealthClient(cc)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Check: %v, %v", resp, err)
			}
			_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"})
			wantCode(t, err, codes.NotFound)
			w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
				t.Fatalf("Watch: %v, %v", r, err)
			}
			hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
			if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("Watch after a change: %v, %v", r, err)
			}
			err = cc.Invoke(ctx, "/grpc.health.v1.Health/Nope", &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse))
			wantCode(t, err, codes.Unimplemented)
		})
	}
}

// TestLargeMessages: messages far larger than the windows cross both ways,
// several in flight, and the bytes arrive intact, with HTTP/2's default
// receive window and with the smallest.
func TestLargeMessages(t *testing.T) {
	for _, window := range []int{0, 1024} {
		for _, budget := range []int{0, 64 << 10} {
			t.Run(fmt.Sprintf("window %d budget %d", window, budget), func(t *testing.T) { largeMessages(t, window, budget) })
		}
	}
}

// largeMessages: messages up to 3 MiB, with the window given; with a
// receive budget smaller than the largest, each is let in alone.
func largeMessages(t *testing.T, window, budget int) {
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS, MaxRecvSize: 8 << 20, StreamWindow: window, RecvBudget: budget})
	s.RegisterService(&echoDesc, &echoService{Repeat: 3})
	cc := dial(t, serve(t, s), clientTLS, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := chat(t, ctx, cc)
	var msgs [][]byte
	// 1016 and 1017 bytes make DATA frames of 1024 and 1025 bytes (5 of
	// gRPC's prefix, 3 of the field's tag and length): the largest read
	// into a 1 KiB buffer and the smallest read into a 2 KiB one.
	for i, size := range []int{0, 1, 1016, 1017, 16375, 16384, 65535, 65536, 1 << 20, 3<<20 + 7} {
		msgs = append(msgs, bytes.Repeat([]byte{byte(i + 1)}, size))
	}
	sent := make(chan error, 1)
	go func() {
		for _, b := range msgs {
			if err := cs.SendMsg(wrapperspb.Bytes(b)); err != nil {
				sent <- err
				return
			}
		}
		sent <- cs.CloseSend()
	}()
	for _, want := range msgs {
		for range 3 {
			got := new(wrapperspb.BytesValue)
			if err := cs.RecvMsg(got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.GetValue(), want) {
				t.Fatalf("got %d bytes, want %d", len(got.GetValue()), len(want))
			}
		}
	}
	if err := cs.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		t.Fatalf("after the last answer: %v, want EOF", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// Too large for the server: ResourceExhausted, and the connection
	// still serves.
	_, err := echo(ctx, cc, make([]byte, 8<<20+1))
	wantCode(t, err, codes.ResourceExhausted)
	if _, err := echo(ctx, cc, []byte("after")); err != nil {
		t.Fatal(err)
	}
}

func echo(ctx context.Context, cc *grpc.ClientConn, b []byte) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	err := cc.Invoke(ctx, "/skiff.test.Echo/Echo", wrapperspb.Bytes(b), out)
	return out.GetValue(), err
}

// TestContext: a handler's context carries the caller's metadata, its
// certificate and the method, ends with the client's deadline and when the
// client cancels.
func TestContext(t *testing.T) {
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	e := &echoService{seen: make(chan context.Context, 1)}
	var unaryMethod string
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS,
		UnaryInterceptor: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			unaryMethod, _ = grpc.Method(ctx)
			return h(ctx, req)
		},
	})
	s.RegisterService(&echoDesc, e)
	cc := dial(t, serve(t, s), clientTLS)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer x", "trace-bin", "\x00\x01\xff")
	if _, err := echo(ctx, cc, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	got := <-e.seen
	md, _ := metadata.FromIncomingContext(got)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer x" {
		t.Errorf("authorization %q", v)
	}
	if v := md.Get("trace-bin"); len(v) != 1 || v[0] != "\x00\x01\xff" {
		t.Errorf("trace-bin %q", v)
	}
	p, ok := peer.FromContext(got)
	if !ok {
		t.Fatal("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) != 1 || info.State.PeerCertificates[0].URIs[0].String() != spiffeID {
		t.Errorf("peer %+v", p.AuthInfo)
	}
	if unaryMethod != "/skiff.test.Echo/Echo" {
		t.Errorf("grpc.Method %q", unaryMethod)
	}

	// The client's deadline.
	dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	cs, err := cc.NewStream(dctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/skiff.test.Echo/Wait")
	if err != nil {
		t.Fatal(err)
	}
	hctx := <-e.seen
	if dl, ok := hctx.Deadline(); !ok || time.Until(dl) > 200*time.Millisecond {
		t.Errorf("handler's deadline %v, %v: want one within 200 ms", dl, ok)
	}
	<-hctx.Done()
	wantCode(t, cs.RecvMsg(new(wrapperspb.BytesValue)), codes.DeadlineExceeded)

	// The client cancels.
	cctx, ccancel := context.WithCancel(context.Background())
	if _, err := cc.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/skiff.test.Echo/Wait"); err != nil {
		t.Fatal(err)
	}
	hctx = <-e.seen
	ccancel()
	<-hctx.Done()
}

// TestOneGoroutinePerConnection: an idle connection costs its reader
// alone, and each open stream its handler.
func TestOneGoroutinePerConnection(t *testing.T) {
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	e := &echoService{seen: make(chan context.Context, 1)}
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS})
	s.RegisterService(&echoDesc, e)
	addr := serve(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A client of grpc-go costs goroutines of its own: count those with
	// the connection up, then the server's as streams open.
	const n = 20
	var streams []grpc.ClientStream
	for range n {
		cc := dial(t, addr, clientTLS)
		cs := chat(t, ctx, cc)
		if err := cs.SendMsg(wrapperspb.Bytes([]byte("x"))); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.BytesValue)); err != nil {
			t.Fatal(err)
		}
		<-e.seen
		streams = append(streams, cs)
	}
	// A handshake's goroutine ends just after it starts its reader: wait
	// for the count to settle.
	var readers, handlers, others int
	settled := polltest.Wait(10*time.Second, func() bool {
		readers, handlers, others = countGoroutines()
		return readers == n && handlers == n && others == 0
	})
	if !settled {
		t.Errorf("%d reader, %d handler and %d other goroutines for %d connections with a stream each, want %d, %d and 0",
			readers, handlers, others, n, n, n)
	}
	_ = streams
}

// countGoroutines counts grpcserver's readers, handlers and its other
// goroutines but the accept loop.
func countGoroutines() (readers, handlers, others int) {
	buf := make([]byte, 1<<20)
	for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
		switch {
		case bytes.Contains(g, []byte("grpcserver.(*conn).serve")):
			readers++
		case bytes.Contains(g, []byte("grpcserver.(*stream).run")):
			handlers++
		case bytes.Contains(g, []byte("skiff/pkg/grpcserver.")) && !bytes.Contains(g, []byte("grpcserver_test.TestOne")) &&
			!bytes.Contains(g, []byte("grpcserver.(*Server).Serve(")):
			others++
		}
	}
	return readers, handlers, others
}
