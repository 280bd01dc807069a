package grpcwire_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// TestClientDeadline: the caller's deadline reaches a grpc-go server as
// grpc-timeout, and the caller gets DeadlineExceeded when it passes.
func TestClientDeadline(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	h := func(_ any, ss grpc.ServerStream) error {
		dl, ok := ss.Context().Deadline()
		if !ok {
			dl = time.Time{}
		}
		deadlines <- time.Until(dl)
		<-ss.Context().Done()
		return ss.Context().Err()
	}
	p := dialGoServer(t, "tcp", h, grpcwire.DialOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.conn.Invoke(ctx, "/test.Slow/Wait", nil)
	if code := grpcwire.CodeOf(err); code != grpcwire.DeadlineExceeded {
		t.Errorf("Invoke past the deadline: %v (%s); want DeadlineExceeded", err, code)
	}
	if left := wait(t, deadlines, "the handler"); left <= 0 || left > 2*time.Second {
		t.Errorf("server's deadline was %v away; want within the client's 2s", left)
	}
}

// TestClientCancel: canceling the caller's context mid-stream ends the
// grpc-go server's stream context and fails the caller's Recv with Canceled.
func TestClientCancel(t *testing.T) {
	ended := make(chan error, 1)
	h := func(_ any, ss grpc.ServerStream) error {
		b := []byte("hi")
		ss.SendMsg(&b)
		<-ss.Context().Done()
		ended <- ss.Context().Err()
		return nil
	}
	p := dialGoServer(t, "tcp", h, grpcwire.DialOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := p.conn.NewStream(ctx, "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	recvd := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		recvd <- err
	}()
	cancel()
	if err := wait(t, recvd, "Recv after cancel"); grpcwire.CodeOf(err) != grpcwire.Canceled {
		t.Errorf("Recv after cancel: %v; want Canceled", err)
	}
	wait(t, ended, "the server's stream context to end")
	if err := s.Send([]byte("late")); grpcwire.CodeOf(err) != grpcwire.Canceled && err != io.EOF {
		t.Errorf("Send after cancel: %v; want Canceled or io.EOF", err)
	}
}

// TestClientServerStops: a grpc-go server stopped mid-stream fails the
// caller's Recv with Unavailable.
func TestClientServerStops(t *testing.T) {
	started := make(chan struct{})
	h := func(_ any, ss grpc.ServerStream) error {
		b := []byte("hi")
		ss.SendMsg(&b)
		close(started)
		<-ss.Context().Done()
		return nil
	}
	p := dialGoServer(t, "unix", h, grpcwire.DialOptions{})
	s, err := p.conn.NewStream(dialTimeout(t), "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	wait(t, started, "the handler")
	p.g.Stop()
	if _, err := s.Recv(); grpcwire.CodeOf(err) != grpcwire.Unavailable {
		t.Errorf("Recv after the server stopped: %v; want Unavailable", err)
	}
}

// TestClientClosedPort: an RPC to a port nobody listens on is Unavailable.
func TestClientClosedPort(t *testing.T) {
	ln := listen(t, "tcp")
	addr := ln.Addr().String()
	ln.Close()
	c, err := grpcwire.Dial(addr, grpcwire.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Invoke(dialTimeout(t), "/test.Echo/Unary", nil); grpcwire.CodeOf(err) != grpcwire.Unavailable {
		t.Errorf("Invoke to a closed port: %v; want Unavailable", err)
	}
}

// TestClientMaxRecvSize: a message over MaxRecvSize fails the RPC with
// ResourceExhausted; one at the limit passes.
func TestClientMaxRecvSize(t *testing.T) {
	p := dialGoServer(t, "tcp", echo, grpcwire.DialOptions{MaxRecvSize: 1024})
	if _, err := p.conn.Invoke(dialTimeout(t), "/test.Echo/Unary", make([]byte, 1024)); err != nil {
		t.Errorf("Invoke at the limit: %v", err)
	}
	_, err := p.conn.Invoke(dialTimeout(t), "/test.Echo/Unary", make([]byte, 1025))
	if grpcwire.CodeOf(err) != grpcwire.ResourceExhausted {
		t.Errorf("Invoke over the limit: %v; want ResourceExhausted", err)
	}
}
