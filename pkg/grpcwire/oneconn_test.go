package grpcwire_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// TestFirstRPCsShareOneConnection: RPCs that start together on a new Conn
// (the agent's CSR and its xDS streams at start-up) share one HTTP/2
// connection, over plaintext and TLS, instead of each dialing its own.
func TestFirstRPCsShareOneConnection(t *testing.T) {
	cert, pool := pkitest.SelfSigned(t)
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		tls   *tls.Config
	}{
		{name: "plaintext"},
		{name: "tls", creds: credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}),
			tls: &tls.Config{RootCAs: pool, ServerName: "localhost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, "tcp")
			goServer(t, ln, tc.creds, echo)
			var dials atomic.Int32
			c, err := grpcwire.Dial(ln.Addr().String(), grpcwire.DialOptions{TLS: tc.tls,
				Dial: func(ctx context.Context) (net.Conn, error) {
					dials.Add(1)
					var d net.Dialer
					return d.DialContext(ctx, "tcp", ln.Addr().String())
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := dialTimeout(t)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if _, err := c.Invoke(ctx, "/test.Echo/Unary", []byte("hi")); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if n := dials.Load(); n != 1 {
				t.Errorf("8 concurrent first RPCs dialed %d connections, want 1", n)
			}
		})
	}
}
