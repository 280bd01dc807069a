package grpcwire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// serveUnix serves s on a fresh Unix socket until the test ends; stop ends
// Serve early and returns its result.
func serveUnix(t *testing.T, s *grpcwire.Server) (path string, stop func() error) {
	t.Helper()
	ln := listen(t, "unix")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	var result error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = wait(t, served, "Serve to return")
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// echoHandler sends back every message and ends with OK at the half-close.
func echoHandler(s grpcwire.ServerStream) error {
	for {
		msg, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(msg); err != nil {
			return err
		}
	}
}

func newServer(t *testing.T) *grpcwire.Server {
	s := grpcwire.NewServer(slog.New(slog.DiscardHandler))
	s.MaxRecvSize = 64 << 20
	s.Handle("/test.Echo/Unary", echoHandler)
	s.Handle("/test.Echo/Bidi", echoHandler)
	return s
}

var bidi = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// TestServerUnaryAndBidi: a grpc-go client's unary call and a bidi stream of
// many messages are answered in order; the handler sees the half-close as
// io.EOF.
func TestServerUnaryAndBidi(t *testing.T) {
	s := newServer(t)
	halfClosed := make(chan struct{})
	s.Handle("/test.Echo/HalfClose", func(ss grpcwire.ServerStream) error {
		if err := echoHandler(ss); err != nil {
			return err
		}
		close(halfClosed)
		return nil
	})
	path, _ := serveUnix(t, s)
	cc := goClient(t, path)
	ctx := dialTimeout(t)
	req, resp := []byte("hello"), []byte(nil)
	if err := cc.Invoke(ctx, "/test.Echo/Unary", &req, &resp); err != nil || string(resp) != "hello" {
		t.Fatalf("Invoke = %q, %v; want hello", resp, err)
	}
	cs, err := cc.NewStream(ctx, bidi, "/test.Echo/HalfClose")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		m := fmt.Appendf(nil, "m%d", i)
		if err := cs.SendMsg(&m); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var got []byte
		if err := cs.RecvMsg(&got); err != nil || string(got) != fmt.Sprintf("m%d", i) {
			t.Fatalf("RecvMsg %d = %q, %v", i, got, err)
		}
	}
	var extra []byte
	if err := cs.RecvMsg(&extra); err != io.EOF {
		t.Fatalf("RecvMsg at the end = %v; want io.EOF", err)
	}
	wait(t, halfClosed, "the handler to see io.EOF")
}

// TestServerStatus: a grpc-go client gets Unimplemented for an unknown
// method, a handler's *Status with its code and message (non-ASCII and '%'
// included), and Unknown for a plain error, both before and after messages.
func TestServerStatus(t *testing.T) {
	const msg = "100% denied: Zugriff verweigert ☂"
	s := newServer(t)
	s.Handle("/test.Fail/Status", func(grpcwire.ServerStream) error {
		return grpcwire.Errorf(grpcwire.PermissionDenied, "%s", msg)
	})
	s.Handle("/test.Fail/StatusAfterMessage", func(ss grpcwire.ServerStream) error {
		if err := ss.Send([]byte("partial")); err != nil {
			return err
		}
		return grpcwire.Errorf(grpcwire.PermissionDenied, "%s", msg)
	})
	s.Handle("/test.Fail/Plain", func(grpcwire.ServerStream) error {
		return errors.New("disk on fire")
	})
	path, _ := serveUnix(t, s)
	cc := goClient(t, path)
	for _, tc := range []struct {
		method string
		code   codes.Code
		msg    string
	}{
		{"/test.Nope/Missing", codes.Unimplemented, "grpcwire: unknown method /test.Nope/Missing"},
		{"/test.Fail/Status", codes.PermissionDenied, msg},
		{"/test.Fail/StatusAfterMessage", codes.PermissionDenied, msg},
		{"/test.Fail/Plain", codes.Unknown, "disk on fire"},
	} {
		t.Run(strings.TrimPrefix(tc.method, "/test."), func(t *testing.T) {
			cs, err := cc.NewStream(dialTimeout(t), bidi, tc.method)
			if err != nil {
				t.Fatal(err)
			}
			cs.CloseSend()
			var m []byte
			for err == nil {
				err = cs.RecvMsg(&m)
			}
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("status %v; want %v %q", err, tc.code, tc.msg)
			}
		})
	}
}

// TestServerCancel: a grpc-go client's cancel ends the handler's Context.
func TestServerCancel(t *testing.T) {
	s := newServer(t)
	ended := make(chan struct{})
	s.Handle("/test.Slow/Wait", func(ss grpcwire.ServerStream) error {
		if err := ss.Send([]byte("hi")); err != nil {
			return err
		}
		<-ss.Context().Done()
		close(ended)
		return ss.Context().Err()
	})
	path, _ := serveUnix(t, s)
	cc := goClient(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := cc.NewStream(ctx, bidi, "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	var m []byte
	if err := cs.RecvMsg(&m); err != nil {
		t.Fatal(err)
	}
	cancel()
	wait(t, ended, "the handler's context to end")
}

// TestServerBigMessages: 8 MB goes up from a grpc-go client and comes back.
func TestServerBigMessages(t *testing.T) {
	path, _ := serveUnix(t, newServer(t))
	cc := goClient(t, path)
	big := bigMessage(8 << 20)
	var got []byte
	if err := cc.Invoke(dialTimeout(t), "/test.Echo/Unary", &big, &got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Invoke of 8 MB = %d bytes, %v; want the same 8 MB", len(got), err)
	}
}

// TestServerTimeout: a grpc-go client's deadline arrives as grpc-timeout and
// becomes the handler's Context deadline.
func TestServerTimeout(t *testing.T) {
	s := newServer(t)
	s.Handle("/test.Deadline/Get", func(ss grpcwire.ServerStream) error {
		dl, ok := ss.Context().Deadline()
		if !ok {
			return grpcwire.Errorf(grpcwire.FailedPrecondition, "no deadline")
		}
		return ss.Send([]byte(dl.Format(time.RFC3339Nano)))
	})
	path, _ := serveUnix(t, s)
	cc := goClient(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	var got []byte
	if err := cc.Invoke(ctx, "/test.Deadline/Get", new([]byte), &got); err != nil {
		t.Fatal(err)
	}
	dl, err := time.Parse(time.RFC3339Nano, string(got))
	if err != nil {
		t.Fatal(err)
	}
	if d := dl.Sub(want); d < -time.Second || d > time.Second {
		t.Errorf("handler's deadline %v is %v from the client's %v", dl, d, want)
	}
}

// TestServerStopsWithStreamsOpen: Serve returns nil promptly when its
// context ends with a stream open, the handler's Context ends, and the
// grpc-go client sees Unavailable.
func TestServerStopsWithStreamsOpen(t *testing.T) {
	s := newServer(t)
	ended := make(chan struct{})
	s.Handle("/test.Slow/Wait", func(ss grpcwire.ServerStream) error {
		if err := ss.Send([]byte("hi")); err != nil {
			return err
		}
		<-ss.Context().Done()
		close(ended)
		return nil
	})
	path, stop := serveUnix(t, s)
	cc := goClient(t, path)
	cs, err := cc.NewStream(dialTimeout(t), bidi, "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	var m []byte
	if err := cs.RecvMsg(&m); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve after its context ended: %v; want nil", err)
	}
	wait(t, ended, "the handler's context to end")
	if err := cs.RecvMsg(&m); status.Code(err) != codes.Unavailable {
		t.Errorf("RecvMsg after the server stopped: %v; want Unavailable", err)
	}
}

// TestServeListenerError: Serve returns the listener's error when it fails
// before the context ends.
func TestServeListenerError(t *testing.T) {
	ln := listen(t, "tcp")
	ln.Close()
	err := newServer(t).Serve(context.Background(), ln)
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener: %v; want net.ErrClosed", err)
	}
}
