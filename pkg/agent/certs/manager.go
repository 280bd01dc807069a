// Package certs keeps the workload's certificate: it makes the private key
// and CSR locally, has istiod's CA sign it, rotates it before it expires,
// and tells subscribers (the SDS server, OUTPUT_CERTS) about every change.
// In FILE_MOUNTED_CERTS mode it serves mounted files and reloads them.
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Cert is one issued identity: key, chain (leaf first) and trusted roots, in PEM.
type Cert struct {
	KeyPEM   []byte
	ChainPEM []byte
	RootPEM  []byte
	Leaf     *x509.Certificate
}

// TLS returns the certificate for crypto/tls.
func (c *Cert) TLS() (tls.Certificate, error) { return tls.X509KeyPair(c.ChainPEM, c.KeyPEM) }

// Signer has a CSR signed; it returns the chain, leaf first, root last.
type Signer interface {
	Sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]*x509.Certificate, error)
}

// Options configure the manager.
type Options struct {
	// Identity is the SPIFFE ID the CSR asks for.
	Identity spiffe.ID
	KeyType  pki.KeyType
	TTL      time.Duration
	// GraceRatio is the share of the lifetime left when the certificate is
	// rotated (SECRET_GRACE_PERIOD_RATIO, 0.5: rotate at half-life).
	GraceRatio float64
	// GraceJitter moves GraceRatio up or down by a random amount of up to
	// this at each rotation (SECRET_GRACE_PERIOD_RATIO_JITTER; zero: none).
	GraceJitter float64
	// OutputDir receives key.pem, cert-chain.pem and root-cert.pem on every change (OUTPUT_CERTS).
	OutputDir string
	// FileDir, when set, is where mounted certificates are read from instead of the CA.
	FileDir string
}

// Manager owns the current certificate.
type Manager struct {
	opts   Options
	signer Signer
	log    *slog.Logger

	mu   sync.Mutex
	cur  *Cert
	subs map[chan struct{}]struct{}
}

// NewManager returns a manager; Run obtains and rotates the certificate.
func NewManager(opts Options, signer Signer, log *slog.Logger) *Manager {
	if opts.GraceRatio <= 0 || opts.GraceRatio >= 1 {
		opts.GraceRatio = 0.5
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	return &Manager{opts: opts, signer: signer, log: log.With("component", "certs"), subs: map[chan struct{}]struct{}{}}
}

// Current returns the certificate in use, or nil before the first one.
func (m *Manager) Current() *Cert {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Subscribe returns a channel that receives a value after every change, and a cancel func.
func (m *Manager) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subs[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.subs, ch)
		m.mu.Unlock()
	}
}

func (m *Manager) set(c *Cert) {
	m.mu.Lock()
	m.cur = c
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default: // a notification is already pending
		}
	}
	m.mu.Unlock()
	if m.opts.OutputDir != "" {
		if err := writeOutput(m.opts.OutputDir, c); err != nil {
			m.log.Warn("write OUTPUT_CERTS", "err", err)
		}
	}
}

// Run obtains the certificate and keeps it fresh until ctx ends. Failures
// are retried with backoff; they never end Run.
func (m *Manager) Run(ctx context.Context) error {
	if m.opts.FileDir != "" {
		return m.watchFiles(ctx)
	}
	backoff := 200 * time.Millisecond
	for {
		requested := time.Now()
		c, err := m.issue(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.log.Warn("certificate request failed, retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		m.set(c)
		wait := m.rotateIn(c.Leaf, requested, time.Now())
		m.log.Info("workload certificate issued", "identity", m.opts.Identity.String(), "serial", c.Leaf.SerialNumber.Text(16),
			"expires", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "rotate_in", wait.Round(time.Millisecond))
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// rotateIn is when to rotate: when GraceRatio of the lifetime is left, give
// or take GraceJitter of it. The lifetime counts from the request, not from NotBefore,
// which CAs backdate to absorb clock skew.
func (m *Manager) rotateIn(leaf *x509.Certificate, requested, now time.Time) time.Duration {
	start := leaf.NotBefore
	if requested.After(start) {
		start = requested
	}
	life := leaf.NotAfter.Sub(start)
	at := start.Add(time.Duration(float64(life) * (1 - m.opts.GraceRatio)))
	jitter := time.Duration((rand.Float64()*2 - 1) * m.opts.GraceJitter * float64(life))
	return max(at.Add(jitter).Sub(now), 0)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// issue makes a fresh key and CSR and has them signed.
func (m *Manager) issue(ctx context.Context) (*Cert, error) {
	key, err := pki.GenerateKey(m.opts.KeyType)
	if err != nil {
		return nil, err
	}
	csr, err := pki.CreateCSR(key, pki.CSROptions{URIs: []*url.URL{m.opts.Identity.URL()}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	chain, err := m.signer.Sign(ctx, csr, m.opts.TTL)
	if err != nil {
		return nil, err
	}
	if len(chain) < 2 {
		return nil, errors.New("CA returned no root with the certificate")
	}
	if !pki.KeyMatches(chain[0].PublicKey, key) {
		return nil, errors.New("CA returned a certificate for another key")
	}
	keyPEM, err := pki.EncodePrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Cert{
		KeyPEM: keyPEM, ChainPEM: pki.EncodeCertificates(chain[:len(chain)-1]...),
		RootPEM: pki.EncodeCertificates(chain[len(chain)-1]), Leaf: chain[0],
	}, nil
}

// writeOutput writes the certificate files atomically, the key mode 0600.
func writeOutput(dir string, c *Cert) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{"key.pem", c.KeyPEM, 0o600}, {"cert-chain.pem", c.ChainPEM, 0o644}, {"root-cert.pem", c.RootPEM, 0o644}} {
		tmp := filepath.Join(dir, "."+f.name+".tmp")
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			return err
		}
	}
	return nil
}

// SecretInfo describes one served secret for operators (istioctl
// proxy-config secret): never the key.
type SecretInfo struct {
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	Valid     bool      `json:"valid"`
	Serial    string    `json:"serial"`
	NotAfter  time.Time `json:"not_after"`
	NotBefore time.Time `json:"not_before"`
}

// Describe reports the workload certificate ("default") and each root ("ROOTCA").
func (c *Cert) Describe(now time.Time) []SecretInfo {
	info := func(name, typ string, x *x509.Certificate) SecretInfo {
		return SecretInfo{Name: name, Type: typ, Valid: now.After(x.NotBefore) && now.Before(x.NotAfter),
			Serial: x.SerialNumber.Text(16), NotAfter: x.NotAfter, NotBefore: x.NotBefore}
	}
	out := []SecretInfo{info("default", "Cert Chain", c.Leaf)}
	if roots, err := pki.ParseCertificates(c.RootPEM); err == nil {
		for _, r := range roots {
			out = append(out, info("ROOTCA", "CA", r))
		}
	}
	return out
}
