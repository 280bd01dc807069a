package istiod_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/keepalive"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// TestStreamWindows: what each of istiod's gRPC ports advertises as a
// stream's receive window in its first SETTINGS, read off the wire: 4 KiB
// on the TLS port, 16 KiB on the plaintext one (docs/benchmarks.md, istiod
// xDS, "the plaintext port's window").
func TestStreamWindows(t *testing.T) {
	serverTLS, clientTLS := pkitest.MutualTLS(t, "spiffe://cluster.local/ns/default/sa/productpage")
	for _, tc := range []struct {
		name           string
		server, client *tls.Config
		want           uint32
	}{
		{"plaintext", nil, nil, 16 << 10},
		{"TLS", serverTLS, clientTLS, 4 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := istiod.NewGRPCServer(tc.server, keepalive.ServerParameters{}, nil, slog.New(slog.DiscardHandler))
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go g.Serve(lis)
			t.Cleanup(g.Stop)
			if got := initialWindow(t, lis.Addr().String(), tc.client); got != tc.want {
				t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE %d, want %d", got, tc.want)
			}
		})
	}
}

// initialWindow dials addr (over TLS when cfg is set), and returns the
// initial window size in the server's first SETTINGS frame.
func initialWindow(t *testing.T, addr string, cfg *tls.Config) uint32 {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2"}
		nc = tls.Client(nc, cfg)
	}
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f.(*http2.SettingsFrame)
	if !ok || s.IsAck() {
		t.Fatalf("first frame %v, want the server's SETTINGS", f)
	}
	w, ok := s.Value(http2.SettingInitialWindowSize)
	if !ok {
		return 65535 // HTTP/2's default, not sent
	}
	return w
}
