package grpcwire_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// dialUnix returns a grpcwire Conn to the Unix socket at path.
func dialUnix(t *testing.T, path string, o grpcwire.DialOptions) *grpcwire.Conn {
	t.Helper()
	o.Dial = func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	c, err := grpcwire.Dial(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSelf: grpcwire's client and server agree on unary and bidi calls,
// 8 MB both ways, metadata, statuses, and the server's MaxRecvSize.
func TestSelf(t *testing.T) {
	s := newServer(t)
	s.Handle("/test.MD/Get", func(ss grpcwire.ServerStream) error {
		return ss.Send([]byte(strings.Join(ss.Metadata("authorization"), ",") + "|" + strings.Join(ss.Metadata("x-node"), ",")))
	})
	s.Handle("/test.Fail/Status", func(ss grpcwire.ServerStream) error {
		return grpcwire.Errorf(grpcwire.NotFound, "no such thing: %s", "ä%20")
	})
	path, _ := serveUnix(t, s)
	c := dialUnix(t, path, grpcwire.DialOptions{Metadata: func(context.Context) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer x"}, nil
	}})
	ctx := dialTimeout(t)

	big := bigMessage(8 << 20)
	for _, req := range [][]byte{nil, []byte("hello"), big} {
		if got, err := c.Invoke(ctx, "/test.Echo/Unary", req); err != nil || !bytes.Equal(got, req) {
			t.Errorf("Invoke of %d bytes = %d bytes, %v", len(req), len(got), err)
		}
	}
	cs, err := c.NewStream(ctx, "/test.Echo/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		want := fmt.Appendf(nil, "m%d", i)
		if err := cs.Send(want); err != nil {
			t.Fatal(err)
		}
		if got, err := cs.Recv(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Recv = %q, %v; want %q", got, err, want)
		}
	}
	cs.CloseSend()
	if _, err := cs.Recv(); err != io.EOF {
		t.Errorf("Recv after CloseSend = %v; want io.EOF", err)
	}
	if err := cs.Send([]byte("late")); err == nil {
		t.Error("Send after CloseSend: no error")
	}

	if got, err := c.Invoke(ctx, "/test.MD/Get", nil, "x-node", "n1"); err != nil || string(got) != "Bearer x|n1" {
		t.Errorf("metadata seen by the handler: %q, %v; want Bearer x|n1", got, err)
	}
	_, err = c.Invoke(ctx, "/test.Fail/Status", nil)
	if st, ok := err.(*grpcwire.Status); !ok || st.Code != grpcwire.NotFound || st.Message != "no such thing: ä%20" {
		t.Errorf("status: %v; want NotFound %q", err, "no such thing: ä%20")
	}
	if _, err := c.Invoke(ctx, "/test.Nope/Missing", nil); grpcwire.CodeOf(err) != grpcwire.Unimplemented {
		t.Errorf("unknown method: %v; want Unimplemented", err)
	}
	small := newServer(t)
	small.MaxRecvSize = 1 << 20
	smallPath, _ := serveUnix(t, small)
	c = dialUnix(t, smallPath, grpcwire.DialOptions{})
	if _, err := c.Invoke(ctx, "/test.Echo/Unary", big); grpcwire.CodeOf(err) != grpcwire.ResourceExhausted {
		t.Errorf("message over the server's MaxRecvSize: %v; want ResourceExhausted", err)
	}
}

// TestSelfDeadlineAndClose: a deadline ends a call with DeadlineExceeded and
// the handler's Context; Conn.Close ends an open stream with Canceled (on
// both sides), and later calls fail.
func TestSelfDeadlineAndClose(t *testing.T) {
	s := newServer(t)
	ended := make(chan error, 2)
	s.Handle("/test.Slow/Wait", func(ss grpcwire.ServerStream) error {
		if err := ss.Send([]byte("hi")); err != nil {
			return err
		}
		<-ss.Context().Done()
		ended <- ss.Context().Err()
		return ss.Context().Err()
	})
	path, _ := serveUnix(t, s)
	c := dialUnix(t, path, grpcwire.DialOptions{})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cs, err := c.NewStream(ctx, "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Recv(); grpcwire.CodeOf(err) != grpcwire.DeadlineExceeded {
		t.Errorf("Recv past the deadline: %v; want DeadlineExceeded", err)
	}
	wait(t, ended, "the handler's context to end at the deadline")

	cs, err = c.NewStream(dialTimeout(t), "/test.Slow/Wait")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Recv(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := cs.Recv(); grpcwire.CodeOf(err) != grpcwire.Canceled {
		t.Errorf("Recv after Close: %v; want Canceled", err)
	}
	wait(t, ended, "the handler's context to end after Close")
	if _, err := c.Invoke(dialTimeout(t), "/test.Echo/Unary", nil); grpcwire.CodeOf(err) != grpcwire.Canceled {
		t.Errorf("Invoke after Close: %v; want Canceled", err)
	}
}

// h2cTransport is a plain net/http HTTP/2 client, to send what grpcwire's
// client would not.
func h2cTransport(t *testing.T, path string) *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// TestServerHonoursTimeoutAlone: a grpc-timeout from a client that keeps no
// deadline itself still ends the handler's Context with DeadlineExceeded,
// and the response says so; a compressed request gets Unimplemented and a
// request that is not gRPC gets HTTP 415.
func TestServerHonoursTimeoutAlone(t *testing.T) {
	s := newServer(t)
	ended := make(chan error, 1)
	s.Handle("/test.Slow/Block", func(ss grpcwire.ServerStream) error {
		<-ss.Context().Done()
		ended <- ss.Context().Err()
		return ss.Context().Err()
	})
	path, _ := serveUnix(t, s)
	tr := h2cTransport(t, path)
	req, _ := http.NewRequest("POST", "http://localhost/test.Slow/Block", http.NoBody)
	req.Header.Set("Content-Type", "application/grpc+proto")
	req.Header.Set("Grpc-Timeout", "200m")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := wait(t, ended, "the handler's context"); err != context.DeadlineExceeded {
		t.Errorf("handler's context ended with %v; want DeadlineExceeded", err)
	}
	if got := resp.Header.Get("Grpc-Status"); got != "4" {
		t.Errorf("grpc-status %q; want 4 (DeadlineExceeded)", got)
	}
	for _, k := range []string{"Date", "Content-Length"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("trailers-only response has %s: %q", k, v)
		}
	}

	req, _ = http.NewRequest("POST", "http://localhost/test.Echo/Unary", http.NoBody)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Encoding", "gzip")
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Grpc-Status"); got != "12" || resp.Header.Get("Grpc-Accept-Encoding") != "identity" {
		t.Errorf("gzip request: grpc-status %q, accept %q; want 12 (Unimplemented), identity", got, resp.Header.Get("Grpc-Accept-Encoding"))
	}

	req, _ = http.NewRequest("POST", "http://localhost/test.Echo/Unary", strings.NewReader("x"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("non-gRPC request: HTTP %d; want 415", resp.StatusCode)
	}
}

// TestClientHTTPStatus: a server that answers with HTTP errors instead of
// gRPC maps to codes as gRPC's HTTP-to-gRPC table says.
func TestClientHTTPStatus(t *testing.T) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		fmt.Sscanf(r.URL.Path, "/http/%d", &code)
		if code == 200 {
			w.Header().Set("Content-Type", "text/html")
		}
		w.WriteHeader(code)
	})}
	ln := listen(t, "unix")
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := dialUnix(t, ln.Addr().String(), grpcwire.DialOptions{})
	for status, want := range map[int]grpcwire.Code{
		200: grpcwire.Unknown, 400: grpcwire.Internal, 401: grpcwire.Unauthenticated,
		403: grpcwire.PermissionDenied, 404: grpcwire.Unimplemented, 429: grpcwire.Unavailable,
		502: grpcwire.Unavailable, 503: grpcwire.Unavailable, 504: grpcwire.Unavailable, 500: grpcwire.Unknown,
	} {
		_, err := c.Invoke(dialTimeout(t), fmt.Sprintf("/http/%d", status), nil)
		if got := grpcwire.CodeOf(err); got != want {
			t.Errorf("HTTP %d: %v; want %s", status, err, want)
		}
	}
}

// TestSelfSendUnblocks: a Send held by flow control (the handler never
// reads) returns Canceled when the caller's context is canceled, and one on
// another stream returns when the Conn closes.
func TestSelfSendUnblocks(t *testing.T) {
	s := newServer(t)
	started := make(chan struct{}, 2)
	s.Handle("/test.Slow/Deaf", func(ss grpcwire.ServerStream) error {
		started <- struct{}{}
		<-ss.Context().Done()
		return nil
	})
	path, _ := serveUnix(t, s)
	c := dialUnix(t, path, grpcwire.DialOptions{})
	huge := make([]byte, 32<<20)
	send := func(ctx context.Context) <-chan error {
		cs, err := c.NewStream(ctx, "/test.Slow/Deaf")
		if err != nil {
			t.Fatal(err)
		}
		sent := make(chan error, 1)
		go func() { sent <- cs.Send(huge) }()
		wait(t, started, "the handler")
		return sent
	}
	ctx, cancel := context.WithCancel(context.Background())
	sent := send(ctx)
	cancel()
	if err := wait(t, sent, "Send after cancel"); grpcwire.CodeOf(err) != grpcwire.Canceled {
		t.Errorf("Send after cancel: %v; want Canceled", err)
	}
	sent = send(context.Background())
	c.Close()
	if err := wait(t, sent, "Send after Close"); grpcwire.CodeOf(err) != grpcwire.Canceled {
		t.Errorf("Send after Close: %v; want Canceled", err)
	}
}
