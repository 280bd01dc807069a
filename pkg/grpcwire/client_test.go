package grpcwire_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// goPeer is a grpc-go server and a grpcwire Conn to it.
type goPeer struct {
	g    *grpc.Server
	conn *grpcwire.Conn
}

// dialGoServer starts a grpc-go server running h on network ("tcp", "tls"
// or "unix") and dials it with o as the base options.
func dialGoServer(t *testing.T, network string, h grpc.StreamHandler, o grpcwire.DialOptions) goPeer {
	t.Helper()
	var creds credentials.TransportCredentials
	lnNet := network
	if network == "tls" {
		lnNet = "tcp"
	}
	ln := listen(t, lnNet)
	addr := ln.Addr().String()
	switch network {
	case "tls":
		cert, pool := pkitest.SelfSigned(t)
		creds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})
		o.TLS = &tls.Config{RootCAs: pool}
	case "unix":
		path := addr
		o.Dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		addr = ""
	}
	g := goServer(t, ln, creds, h)
	c, err := grpcwire.Dial(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return goPeer{g, c}
}

var networks = []string{"tcp", "tls", "unix"}

// TestClientUnaryAndBidi: unary and a bidi stream of many messages reach a
// grpc-go server and come back in order, over TCP, TLS and a Unix socket.
func TestClientUnaryAndBidi(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			p := dialGoServer(t, network, echo, grpcwire.DialOptions{})
			ctx := dialTimeout(t)
			got, err := p.conn.Invoke(ctx, "/test.Echo/Unary", []byte("hello"))
			if err != nil || string(got) != "hello" {
				t.Fatalf("Invoke = %q, %v; want hello", got, err)
			}
			s, err := p.conn.NewStream(ctx, "/test.Echo/Bidi")
			if err != nil {
				t.Fatal(err)
			}
			const n = 200
			sent := make(chan error, 1)
			go func() {
				for i := range n {
					if err := s.Send(fmt.Appendf(nil, "m%d", i)); err != nil {
						sent <- err
						return
					}
				}
				sent <- s.CloseSend()
			}()
			for i := range n {
				msg, err := s.Recv()
				if want := fmt.Sprintf("m%d", i); err != nil || string(msg) != want {
					t.Fatalf("Recv %d = %q, %v; want %s", i, msg, err, want)
				}
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("Recv after the last message = %v; want io.EOF", err)
			}
			if err := wait(t, sent, "sends"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClientBigMessages: 8 MB goes up to a grpc-go server and comes back.
func TestClientBigMessages(t *testing.T) {
	p := dialGoServer(t, "tcp", echo, grpcwire.DialOptions{})
	big := bigMessage(8 << 20)
	got, err := p.conn.Invoke(dialTimeout(t), "/test.Echo/Big", big)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Invoke of 8 MB = %d bytes, %v; want the same 8 MB back", len(got), err)
	}
}

// TestClientServerStreamBig: a grpc-go server streams an 8 MB message
// between small ones, to a client over TLS.
func TestClientServerStreamBig(t *testing.T) {
	big := bigMessage(8 << 20)
	h := func(_ any, ss grpc.ServerStream) error {
		for _, m := range [][]byte{[]byte("first"), big, []byte("last")} {
			if err := ss.SendMsg(&m); err != nil {
				return err
			}
		}
		return nil
	}
	p := dialGoServer(t, "tls", h, grpcwire.DialOptions{})
	s, err := p.conn.NewStream(dialTimeout(t), "/test.Stream/Big")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{[]byte("first"), big, []byte("last")} {
		if got, err := s.Recv(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Recv %d = %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("Recv at the end = %v; want io.EOF", err)
	}
}

// TestClientStatus: a grpc-go server's status reaches the caller with its
// code and its message intact, non-ASCII and '%' included (percent-encoded
// on the wire), both as a trailers-only response and after a message.
func TestClientStatus(t *testing.T) {
	const msg = "quota 100% used: Überlauf ☃\n(retry later)"
	h := func(_ any, ss grpc.ServerStream) error {
		if m, _ := grpc.MethodFromServerStream(ss); m == "/test.Status/AfterMessage" {
			b := []byte("partial")
			if err := ss.SendMsg(&b); err != nil {
				return err
			}
		}
		return status.Error(codes.ResourceExhausted, msg)
	}
	p := dialGoServer(t, "tcp", h, grpcwire.DialOptions{})
	for _, method := range []string{"/test.Status/TrailersOnly", "/test.Status/AfterMessage"} {
		_, err := p.conn.Invoke(dialTimeout(t), method, nil)
		var st *grpcwire.Status
		if !errors.As(err, &st) || st.Code != grpcwire.ResourceExhausted || st.Message != msg {
			t.Errorf("%s: Invoke error %v; want ResourceExhausted %q", method, err, msg)
		}
	}
}

// TestClientMetadata: DialOptions.Metadata (called per RPC) and NewStream's
// pairs arrive at a grpc-go server as request metadata.
func TestClientMetadata(t *testing.T) {
	h := func(_ any, ss grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		b := []byte(strings.Join(md.Get("authorization"), ",") + "|" + strings.Join(md.Get("x-node"), ","))
		return ss.SendMsg(&b)
	}
	calls := 0
	o := grpcwire.DialOptions{Metadata: func(context.Context) (map[string]string, error) {
		calls++
		return map[string]string{"authorization": fmt.Sprintf("Bearer t%d", calls)}, nil
	}}
	p := dialGoServer(t, "unix", h, o)
	for i := 1; i <= 2; i++ {
		got, err := p.conn.Invoke(dialTimeout(t), "/test.MD/Get", nil, "x-node", "sidecar~10.0.0.1")
		if want := fmt.Sprintf("Bearer t%d|sidecar~10.0.0.1", i); err != nil || string(got) != want {
			t.Errorf("RPC %d: server saw %q, %v; want %q", i, got, err, want)
		}
	}
}

// TestClientConcurrentStreams: 50 bidi streams at once on one Conn each get
// their own messages back, in order.
func TestClientConcurrentStreams(t *testing.T) {
	p := dialGoServer(t, "tcp", echo, grpcwire.DialOptions{})
	ctx := dialTimeout(t)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			s, err := p.conn.NewStream(ctx, "/test.Echo/Bidi")
			if err != nil {
				errs <- err
				return
			}
			for j := range 20 {
				want := fmt.Sprintf("s%d-m%d", i, j)
				if err := s.Send([]byte(want)); err != nil {
					errs <- err
					return
				}
				if got, err := s.Recv(); err != nil || string(got) != want {
					errs <- fmt.Errorf("stream %d: Recv = %q, %v; want %s", i, got, err, want)
					return
				}
			}
			s.CloseSend()
			if _, err := s.Recv(); err != io.EOF {
				errs <- fmt.Errorf("stream %d: end: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
