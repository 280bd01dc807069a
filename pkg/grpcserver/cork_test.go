package grpcserver_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
)

// TestFramesInOneWrite: a large answer to a client with Envoy's large
// windows goes out in writes of four frames (64 KiB), not one write per
// 16 KiB frame, over TLS and plaintext.
func TestFramesInOneWrite(t *testing.T) {
	for _, tc := range ports(t) {
		t.Run(tc.name, func(t *testing.T) {
			s := grpcserver.New(grpcserver.Options{TLS: tc.server})
			s.RegisterService(&echoDesc, &echoService{})
			addr, counted := serveCounted(t, s)
			cc := dial(t, addr, tc.client, envoyWindows...)
			ctx := context.Background()
			if _, err := echo(ctx, cc, []byte("hi")); err != nil {
				t.Fatal(err) // the connection's set-up, not counted
			}
			before := counted.large.Load()
			// 300000 bytes and their prefixes: 19 frames of at most 16 KiB.
			got, err := echo(ctx, cc, make([]byte, 300000))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 300000 {
				t.Fatalf("answer of %d bytes, want 300000", len(got))
			}
			if n := counted.large.Load() - before; n != 5 {
				t.Errorf("answer in %d writes of more than 1 KiB, want 5", n)
			}
		})
	}
}

// TestStopWithWriterStuck: Stop ends a connection whose writer is stuck in
// a write to a peer that reads nothing, over TLS too, where closing the
// tls.Conn would first try to send a close_notify behind that write.
func TestStopWithWriterStuck(t *testing.T) {
	for _, tc := range ports(t) {
		t.Run(tc.name, func(t *testing.T) {
			s := grpcserver.New(grpcserver.Options{TLS: tc.server})
			s.RegisterService(&echoDesc, &echoService{})
			lis := &stuckListener{Listener: listen(t), entered: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- s.Serve(lis) }()
			cc := dial(t, lis.Addr().String(), tc.client, envoyWindows...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := echo(ctx, cc, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			lis.block()
			go echo(ctx, cc, make([]byte, 300000))
			<-lis.entered
			stopped := make(chan struct{})
			go func() { s.Stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(30 * time.Second): // a guard, not a measure: it hangs without the fix
				t.Fatal("Stop did not return while a write was stuck")
			}
			if err := <-done; !errors.Is(err, grpcserver.ErrServerStopped) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// stuckListener's connections, once blocked, hold every write of more
// than 1 KiB until they are closed: a peer that reads nothing, whose
// socket buffers are full.
type stuckListener struct {
	net.Listener
	mu      sync.Mutex
	blocked bool
	entered chan struct{} // closed when the first write is held
	once    sync.Once
}

func (l *stuckListener) block() {
	l.mu.Lock()
	l.blocked = true
	l.mu.Unlock()
}

func (l *stuckListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stuckConn{Conn: c, l: l, closed: make(chan struct{})}, nil
}

type stuckConn struct {
	net.Conn
	l         *stuckListener
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *stuckConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	blocked := c.l.blocked
	c.l.mu.Unlock()
	if blocked && len(b) > 1024 {
		c.l.once.Do(func() { close(c.l.entered) })
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *stuckConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
