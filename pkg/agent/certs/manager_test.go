package certs_test

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/agenttest"
	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

func client(t *testing.T, ca *agenttest.CA) *certs.CAClient {
	tok := filepath.Join(t.TempDir(), "istio-token")
	if err := os.WriteFile(tok, []byte(agenttest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := certs.DialCA(certs.CAOptions{Addr: ca.Addr, Plaintext: true, TokenPath: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestIssueAndRotate gets a certificate from the real CA, verifies it, and
// sees it rotated before expiry (a 4 s lifetime rotates at about 2 s).
func TestIssueAndRotate(t *testing.T) {
	ca := agenttest.StartCA(t, "default", "reviews")
	out := t.TempDir()
	m := certs.NewManager(certs.Options{Identity: ca.Identity, KeyType: pki.ECDSAP256, TTL: 4 * time.Second,
		GraceRatio: 0.5, OutputDir: out}, client(t, ca), slog.New(slog.DiscardHandler))
	changed, cancel := m.Subscribe()
	defer cancel()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Run(ctx) }()
	defer func() { stop(); <-done }()

	var serials []string
	var first *certs.Cert
	deadline := time.After(10 * time.Second)
	for len(serials) < 2 {
		select {
		case <-changed:
			c := m.Current()
			if first == nil {
				first = c
			}
			serials = append(serials, c.Leaf.SerialNumber.String())
		case <-deadline:
			t.Fatalf("got %d certificates in 10 s, want a rotation", len(serials))
		}
	}
	if serials[0] == serials[1] {
		t.Error("rotation reissued the same certificate")
	}
	// X.509 times are whole seconds, so the lifetime is between 3 and 4 s,
	// and half of it less 1% jitter is at least 1.47 s.
	if d := time.Since(start); d < 1400*time.Millisecond {
		t.Errorf("rotated after %s, want about half of the 4 s lifetime", d)
	}
	if time.Now().After(first.Leaf.NotAfter) {
		t.Error("rotated only after expiry")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first.RootPEM)
	if _, err := first.Leaf.Verify(x509.VerifyOptions{Roots: roots}); err != nil {
		t.Errorf("chain does not verify: %v", err)
	}
	if got := first.Leaf.URIs[0].String(); got != "spiffe://cluster.local/ns/default/sa/reviews" {
		t.Errorf("SAN %s", got)
	}
	if _, err := first.TLS(); err != nil {
		t.Errorf("key and chain: %v", err)
	}
	for _, f := range []string{"key.pem", "cert-chain.pem", "root-cert.pem"} {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			t.Errorf("OUTPUT_CERTS %s: %v", f, err)
		} else if f == "key.pem" && st.Mode().Perm() != 0o600 {
			t.Errorf("key.pem mode %v", st.Mode().Perm())
		}
	}
}

// TestRetriesWhileCAIsDown: a refused token keeps the manager retrying, never failing.
func TestRetriesWhileCAIsDown(t *testing.T) {
	c, err := certs.DialCA(certs.CAOptions{Addr: "127.0.0.1:1", Plaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := certs.NewManager(certs.Options{Identity: spiffe.ID{TrustDomain: "cluster.local", Namespace: "default", ServiceAccount: "x"}}, c, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
	if m.Current() != nil {
		t.Error("certificate without a CA")
	}
}

func TestFileMountedCerts(t *testing.T) {
	ca := agenttest.StartCA(t, "default", "reviews")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Issue one certificate into dir, then serve dir as mounted files.
	issuer2 := certs.NewManager(certs.Options{Identity: ca.Identity, OutputDir: dir, TTL: time.Hour}, client(t, ca), slog.New(slog.DiscardHandler))
	ch, unsub := issuer2.Subscribe()
	go func() { _ = issuer2.Run(ctx) }()
	<-ch
	unsub()
	m := certs.NewManager(certs.Options{FileDir: dir}, nil, slog.New(slog.DiscardHandler))
	changed, unsub2 := m.Subscribe()
	defer unsub2()
	go func() { _ = m.Run(ctx) }()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("mounted certificates not loaded")
	}
	before := m.Current().Leaf.SerialNumber.String()
	// Replace the files with a fresh certificate: the manager reloads.
	fresh := certs.NewManager(certs.Options{Identity: ca.Identity, OutputDir: dir, TTL: time.Hour}, client(t, ca), slog.New(slog.DiscardHandler))
	go func() { _ = fresh.Run(ctx) }()
	deadline := time.After(5 * time.Second)
	for m.Current().Leaf.SerialNumber.String() == before {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("changed files not reloaded")
		}
	}
}
