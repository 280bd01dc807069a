package ca

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go's klog flush daemon and idle keep-alive connections to
		// the test API server outlive the tests that used them.
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Type).updateUnfinishedWorkLoop"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext.func1"),
	)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// tokenKey is a test issuer of JWTs for file mode.
type tokenKey struct {
	key    crypto.Signer
	issuer string
}

func newTokenKey(t testing.TB) *tokenKey {
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return &tokenKey{key: key, issuer: "https://skiff.test"}
}

func (k *tokenKey) authenticator(t testing.TB) *JWTAuthenticator {
	a, err := NewJWTAuthenticator(JWTConfig{Issuer: k.issuer, Keys: []crypto.PublicKey{k.key.Public()}, TrustDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (k *tokenKey) token(t testing.TB, ns, sa string) string {
	tok, err := SignToken(k.key, TokenClaims{
		Issuer: k.issuer, Audiences: []string{"istio-ca"}, Namespace: ns, ServiceAccount: sa,
		IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// newFileCA returns a file-mode CA in a new directory that accepts tokens from tk.
func newFileCA(t testing.TB, tk *tokenKey, mod func(*Config)) *CA {
	t.Helper()
	cfg := Config{SelfSignedDir: filepath.Join(t.TempDir(), "ca")}
	if tk != nil {
		cfg.Authenticators = []Authenticator{tk.authenticator(t)}
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs the CA's gRPC service over TLS on a loopback port and returns
// its address.
func serve(t testing.TB, c *CA) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(c.ServerTLSConfig())))
	c.Register(s)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return l.Addr().String()
}

// client dials the CA, trusting roots and presenting cert if not nil.
func client(t testing.TB, addr string, roots *pki.Bundle, cert *tls.Certificate) pb.IstioCertificateServiceClient {
	t.Helper()
	tc := &tls.Config{RootCAs: roots.Pool(), ServerName: "istiod.istio-system.svc", MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewIstioCertificateServiceClient(conn)
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newCSR returns a key and a CSR asking for the given URI SANs.
func newCSR(t testing.TB, kt pki.KeyType, uris ...string) (crypto.Signer, string) {
	t.Helper()
	key, err := pki.GenerateKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	var opts pki.CSROptions
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		opts.URIs = append(opts.URIs, pu)
	}
	csr, err := pki.CreateCSR(key, opts)
	if err != nil {
		t.Fatal(err)
	}
	return key, string(csr)
}

// parseChain parses a response chain: the leaf and intermediates, one
// certificate per element, and last the root bundle.
func parseChain(t testing.TB, chain []string) (leaf *x509.Certificate, inter []*x509.Certificate, roots *pki.Bundle) {
	t.Helper()
	if len(chain) < 2 {
		t.Fatalf("chain has %d elements, want leaf ... root", len(chain))
	}
	for i, p := range chain[:len(chain)-1] {
		c, err := pki.ParseCertificate([]byte(p))
		if err != nil {
			t.Fatalf("chain element %d: %v", i, err)
		}
		if i == 0 {
			leaf = c
		} else {
			inter = append(inter, c)
		}
	}
	roots, err := pki.ParseBundle([]byte(chain[len(chain)-1]))
	if err != nil {
		t.Fatalf("last chain element: %v", err)
	}
	return leaf, inter, roots
}

// tlsCert makes a client certificate from a key and a response chain.
func tlsCert(t testing.TB, key crypto.Signer, chain []string) *tls.Certificate {
	t.Helper()
	leaf, inter, _ := parseChain(t, chain)
	tc := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, c := range inter {
		tc.Certificate = append(tc.Certificate, c.Raw)
	}
	return tc
}

// opensslVerify runs `openssl verify` on the leaf of a response chain with
// the chain's intermediates as untrusted and trusted roots as the CA file.
func opensslVerify(t testing.TB, chain []string, trusted *pki.Bundle) {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatalf("openssl not installed: %v", err)
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"verify", "-CAfile", write("roots.pem", string(trusted.PEM())), "-purpose", "sslclient"}
	if len(chain) > 2 {
		args = append(args, "-untrusted", write("inter.pem", strings.Join(chain[1:len(chain)-1], "")))
	}
	args = append(args, write("leaf.pem", chain[0]))
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func mustID(t testing.TB, ns, sa string) spiffe.ID {
	t.Helper()
	id, err := spiffe.New("cluster.local", ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustURL(t testing.TB, s string) []*url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return []*url.URL{u}
}

// runCA runs the CA's background work until the test ends.
func runCA(t testing.TB, c *CA) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
