package ca

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Mode says where a CA's key material comes from.
type Mode string

// The key sources, in the order New tries them.
const (
	ModePlugin     Mode = "plugin"
	ModeKubernetes Mode = "kubernetes"
	ModeFile       Mode = "file"
)

// CA signs workload certificates. Create it with New, start its watchers and
// publishers with Run, and serve it with Register.
type CA struct {
	cfg  Config
	log  *slog.Logger
	mode Mode
	dir  string // the watched directory in plug-in and file modes

	state atomic.Pointer[signingState]
	auths []Authenticator

	issued, refused atomic.Uint64
	rejected        atomic.Uint64 // key material changes not taken

	mu      sync.Mutex // serializes reloads and guards changed
	changed chan struct{}

	servingMu sync.Mutex
	serving   atomic.Pointer[servingCert]
}

// New loads the CA's key material (generating and persisting a self-signed
// root on first start unless a plug-in CA is present) and returns the CA.
// ctx bounds the Kubernetes calls made while loading.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*CA, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &CA{cfg: cfg, log: log.With("component", "ca"), changed: make(chan struct{})}
	now := cfg.Now()
	generate := func() (material, error) { return newSelfSigned(cfg.TrustDomain, now, cfg.RootTTL) }

	var (
		m      material
		source string
	)
	found := false
	if cfg.PluginCertsDir != "" {
		var err error
		m, found, err = readDir(cfg.PluginCertsDir)
		if err != nil {
			return nil, err
		}
		if found {
			c.mode, c.dir, source = ModePlugin, cfg.PluginCertsDir, "plug-in CA "+cfg.PluginCertsDir
		}
	}
	switch {
	case found:
	case cfg.Client != nil:
		var (
			created bool
			err     error
		)
		m, created, err = loadOrCreateSecret(ctx, cfg.Client, cfg.Namespace, generate)
		if err != nil {
			return nil, err
		}
		c.mode, source = ModeKubernetes, "secret "+cfg.Namespace+"/"+SecretName
		if created {
			c.log.Info("generated self-signed root", "secret", cfg.Namespace+"/"+SecretName)
		}
	default:
		var err error
		m, found, err = readDir(cfg.SelfSignedDir)
		if err != nil {
			return nil, err
		}
		if !found {
			if m, err = generate(); err != nil {
				return nil, err
			}
			if err := writeDir(cfg.SelfSignedDir, m); err != nil {
				return nil, err
			}
			c.log.Info("generated self-signed root", "dir", cfg.SelfSignedDir)
		}
		c.mode, c.dir, source = ModeFile, cfg.SelfSignedDir, "CA directory "+cfg.SelfSignedDir
	}
	st, err := parseMaterial(m, source, now)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	c.state.Store(st)
	if !cfg.DisableCertAuthenticator {
		c.auths = append(c.auths, NewCertAuthenticator(c))
	}
	c.auths = append(c.auths, cfg.Authenticators...)
	c.log.Info("CA ready", "mode", c.mode, "source", source, "issuer", st.issuer.Cert.Subject.String(),
		"roots", st.roots.Len(), "issuer_expires", st.issuer.Cert.NotAfter)
	return c, nil
}

// Mode returns where the key material comes from.
func (c *CA) Mode() Mode { return c.mode }

// TrustDomain returns the trust domain of issued identities.
func (c *CA) TrustDomain() string { return c.cfg.TrustDomain }

// Stats counts CreateCertificate outcomes and key material changes.
type Stats struct {
	// Issued counts certificates signed for callers.
	Issued uint64
	// Refused counts requests refused for any reason.
	Refused uint64
	// Rejected counts reloads of key material (directory or Secret) that
	// could not be used, so the issuer stayed.
	Rejected uint64
}

// Stats returns the counts of issued and refused certificate requests and
// of rejected key material.
func (c *CA) Stats() Stats {
	return Stats{Issued: c.issued.Load(), Refused: c.refused.Load(), Rejected: c.rejected.Load()}
}

// Authenticators returns the authenticators CreateCertificate tries, in
// order, for reuse by other services on the same port (xDS on 15012).
func (c *CA) Authenticators() []Authenticator { return slices.Clone(c.auths) }

// Roots returns the current bundle of trusted roots.
func (c *CA) Roots() *pki.Bundle { return c.state.Load().roots }

// RootCertPEM returns the current root bundle as PEM.
func (c *CA) RootCertPEM() []byte { return c.state.Load().roots.PEM() }

// Issuer returns the certificate that currently signs.
func (c *CA) Issuer() *x509.Certificate { return c.state.Load().issuer.Cert }

// Changed returns a channel closed at the next change of key material
// (issuer or roots). Take the channel before reading the state it guards.
func (c *CA) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Reload re-reads the plug-in or file-mode directory and switches to its
// material if it changed and is valid; on error the current issuer stays.
// Run calls it when the directory changes.
func (c *CA) Reload() error {
	if c.dir == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, found, err := readDir(c.dir)
	if err != nil {
		c.rejected.Add(1)
		return err
	}
	if !found {
		c.rejected.Add(1)
		return fmt.Errorf("reload CA: %s or %s missing in %s", CACertFile, CAKeyFile, c.dir)
	}
	return c.applyLocked(m)
}

// apply switches to new key material if it differs and is valid.
func (c *CA) apply(m material) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(m)
}

func (c *CA) applyLocked(m material) error {
	old := c.state.Load()
	if m.equal(old.raw) {
		return nil
	}
	st, err := parseMaterial(m, old.source, c.cfg.Now())
	if err != nil {
		c.rejected.Add(1)
		return fmt.Errorf("reload CA: %w", err)
	}
	c.state.Store(st)
	close(c.changed)
	c.changed = make(chan struct{})
	c.log.Info("CA key material changed", "source", st.source, "issuer", st.issuer.Cert.Subject.String(),
		"roots", st.roots.Len())
	return nil
}

// Run watches the key material directory (plug-in and file modes) or the
// istio-ca-secret Secret (Kubernetes mode) and switches issuer when it
// changes, writes
// the root bundle to RootCertPath and, in Kubernetes mode, publishes it as a
// ConfigMap in every namespace, until ctx ends.
func (c *CA) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	if c.dir != "" {
		g.Go(func() error { return c.watch(ctx) })
	}
	if c.mode == ModeKubernetes {
		g.Go(func() error { return c.watchSecret(ctx) })
	}
	if c.cfg.RootCertPath != "" {
		g.Go(func() error { return c.publishFile(ctx) })
	}
	if c.cfg.Client != nil && !c.cfg.DisableConfigMapPublishing {
		g.Go(func() error {
			return newRootPublisher(c.cfg.Client, c, c.log).run(ctx)
		})
	}
	return g.Wait()
}

// Issued is a signed certificate.
type Issued struct {
	// DER is the new certificate.
	DER []byte
	// NotAfter is when it expires.
	NotAfter time.Time
	// Chain is the leaf, any intermediates and last the root bundle, each
	// as a PEM string: the cert_chain of an IstioCertificateResponse.
	Chain []string
}

// Leaf parses the new certificate.
func (is *Issued) Leaf() (*x509.Certificate, error) {
	return x509.ParseCertificate(is.DER)
}

// SANError is returned when a CSR asks for a name the caller did not prove.
type SANError struct {
	// SAN is the refused name as OpenSSL prints it, e.g. "URI:spiffe://...".
	SAN string
	// Identity is what the caller proved.
	Identity spiffe.ID
}

// Error implements error.
func (e *SANError) Error() string {
	return fmt.Sprintf("CSR asks for SAN %q but the caller proved only %s", e.SAN, e.Identity)
}

// Sign signs a CSR (PEM) for id, which the caller has proved. The
// certificate carries exactly id as a URI SAN; a CSR naming any other SAN is
// refused with a *SANError. ttl 0 means the default; a negative ttl is
// invalid; a ttl over the maximum is cut to it. Bad input errors wrap
// pki.ErrInvalid.
func (c *CA) Sign(csrPEM []byte, id spiffe.ID, ttl time.Duration) (*Issued, error) {
	switch {
	case ttl < 0:
		return nil, fmt.Errorf("%w: requested lifetime %v is negative", pki.ErrInvalid, ttl)
	case ttl == 0:
		ttl = c.cfg.DefaultTTL
	case ttl > c.cfg.MaxTTL:
		ttl = c.cfg.MaxTTL
	}
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", pki.ErrInvalid, err)
	}
	if id.TrustDomain != c.cfg.TrustDomain {
		return nil, &SANError{SAN: "URI:" + id.String(), Identity: id}
	}
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	if !onlyURI(csr, id.String()) {
		want := "URI:" + id.String()
		for _, san := range pki.SANs(csr) {
			if san != want {
				return nil, &SANError{SAN: san, Identity: id}
			}
		}
	}
	st := c.state.Load()
	now := c.cfg.Now()
	der, err := st.issuer.IssueLeafDER(csr.PublicKey, pki.LeafOptions{
		URIs:      []*url.URL{id.URL()},
		NotBefore: now,
		TTL:       ttl,
	})
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s: %w", id, err)
	}
	notAfter := now.Add(ttl)
	if notAfter.After(st.issuer.Cert.NotAfter) {
		notAfter = st.issuer.Cert.NotAfter
	}
	chain := make([]string, 0, 1+len(st.chainTail))
	chain = append(chain, pki.CertificatePEM(der))
	chain = append(chain, st.chainTail...)
	return &Issued{DER: der, NotAfter: notAfter, Chain: chain}, nil
}

// onlyURI reports whether every SAN of csr is the URI uri (or it has
// none): what Sign's check of pki.SANs accepts, without building the
// strings.
func onlyURI(csr *x509.CertificateRequest, uri string) bool {
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) > 0 {
		return false
	}
	for _, u := range csr.URIs {
		if u.String() != uri {
			return false
		}
	}
	return true
}

// servingCert is istiod's current serving certificate.
type servingCert struct {
	cert    *tls.Certificate
	renewAt time.Time
	state   *signingState
}

// ServingCertificate returns istiod's serving certificate for the configured
// DNS names, issued by this CA; it fits tls.Config.GetCertificate. The
// certificate is renewed at half its lifetime and when the issuer changes.
func (c *CA) ServingCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	now := c.cfg.Now()
	st := c.state.Load()
	if cur := c.serving.Load(); cur != nil && cur.state == st && now.Before(cur.renewAt) {
		return cur.cert, nil
	}
	c.servingMu.Lock()
	defer c.servingMu.Unlock()
	st = c.state.Load()
	if cur := c.serving.Load(); cur != nil && cur.state == st && now.Before(cur.renewAt) {
		return cur.cert, nil
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return nil, err
	}
	leaf, err := st.issuer.Issue(key.Public(), pki.LeafOptions{
		DNSNames:  c.cfg.ServingDNSNames,
		NotBefore: now,
		TTL:       c.cfg.ServingTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("issue serving certificate: %w", err)
	}
	tc := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, ch := range st.issuer.Chain() {
		if !ch.Equal(st.issuer.Root) {
			tc.Certificate = append(tc.Certificate, ch.Raw)
		}
	}
	c.serving.Store(&servingCert{cert: tc, renewAt: now.Add(leaf.NotAfter.Sub(now) / 2), state: st})
	c.log.Info("issued serving certificate", "dns", strings.Join(c.cfg.ServingDNSNames, ","), "expires", leaf.NotAfter)
	return tc, nil
}

// ServerTLSConfig returns a TLS configuration for istiod's secure port
// (15012): the serving certificate from ServingCertificate, and client
// certificates requested but not verified at the handshake, so that a
// caller with an expired or foreign certificate can still present a token,
// and certificates are checked per call against the current roots (see
// CertAuthenticator).
func (c *CA) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: c.ServingCertificate,
		ClientAuth:     tls.RequestClientCert,
		MinVersion:     tls.VersionTLS12,
	}
}
