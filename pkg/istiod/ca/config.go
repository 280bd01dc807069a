package ca

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Defaults for Config.
const (
	DefaultTTL          = 24 * time.Hour
	DefaultMaxTTL       = 90 * 24 * time.Hour
	DefaultRootTTL      = 10 * 365 * 24 * time.Hour
	DefaultServingTTL   = 24 * time.Hour
	DefaultNamespace    = "istio-system"
	DefaultPollInterval = time.Minute
)

// Names Istio uses for the CA's Kubernetes objects and files.
const (
	// SecretName is the Secret holding the self-signed root in Kubernetes mode.
	SecretName = "istio-ca-secret"
	// SecretType is the type of SecretName.
	SecretType = "istio.io/ca-root"
	// RootConfigMapName is the ConfigMap publishing the root bundle in each namespace.
	RootConfigMapName = "istio-ca-root-cert"
	// RootConfigMapKey is the root bundle's key in RootConfigMapName.
	RootConfigMapKey = "root-cert.pem"

	// CACertFile is the signing certificate.
	CACertFile = "ca-cert.pem"
	// CAKeyFile is the signing certificate's private key.
	CAKeyFile = "ca-key.pem"
	// CertChainFile holds the certificates from the signing certificate up
	// to the root (empty when the signing certificate is the root).
	CertChainFile = "cert-chain.pem"
	// RootCertFile holds the trusted roots.
	RootCertFile = "root-cert.pem"
)

// DefaultServingDNSNames returns the names in istiod's serving
// certificate, a new slice on each call.
func DefaultServingDNSNames() []string {
	return []string{
		"istiod.istio-system.svc",
		"istiod.istio-system.svc.cluster.local",
		"istiod.istio-system",
		"istiod",
		"istio-pilot.istio-system.svc",
	}
}

// Config configures a CA. Zero values take the defaults above.
type Config struct {
	// TrustDomain is the trust domain of issued identities (cluster.local).
	TrustDomain string

	// PluginCertsDir is the plug-in CA directory ("cacerts"). When it holds
	// ca-cert.pem and ca-key.pem, those sign, and the directory is watched.
	PluginCertsDir string
	// Client selects Kubernetes mode: without plug-in certificates the root
	// is kept in the istio-ca-secret Secret in Namespace, and the root bundle
	// is published as the istio-ca-root-cert ConfigMap in every namespace.
	// It is a REST client of the core/v1 API (a clientset's
	// CoreV1().RESTClient(), say).
	Client rest.Interface
	// Namespace is istiod's namespace (istio-system).
	Namespace string
	// SelfSignedDir is file mode's directory for a self-signed root, created
	// on first start (used without plug-in certificates and without Client).
	SelfSignedDir string
	// DisableConfigMapPublishing turns the ConfigMap controller off in
	// Kubernetes mode.
	DisableConfigMapPublishing bool

	// RootCertPath, when set, is where the root bundle is written (and
	// rewritten when it changes), e.g. for file mode's workloads.
	RootCertPath string

	// DefaultTTL is the lifetime of a certificate whose request gives none (24h).
	DefaultTTL time.Duration
	// MaxTTL caps requested lifetimes (90 days).
	MaxTTL time.Duration
	// RootTTL is the lifetime of a generated self-signed root (10 years).
	RootTTL time.Duration

	// ServingDNSNames are the DNS names of istiod's serving certificate.
	ServingDNSNames []string
	// ServingTTL is the serving certificate's lifetime (24h); it is renewed
	// at half its life and whenever the issuer changes.
	ServingTTL time.Duration

	// Authenticators prove callers' identities, tried in order after the
	// CA's own CertAuthenticator (renewal with the current certificate).
	Authenticators []Authenticator
	// DisableCertAuthenticator leaves the CertAuthenticator out.
	DisableCertAuthenticator bool

	// PollInterval is how often the plug-in directory is re-read in case a
	// file-system event was missed (1 minute).
	PollInterval time.Duration
	// Now returns the current time (time.Now); tests move it.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.TrustDomain == "" {
		c.TrustDomain = spiffe.DefaultTrustDomain
	}
	if err := spiffe.ValidateTrustDomain(c.TrustDomain); err != nil {
		return fmt.Errorf("ca config: %w", err)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = DefaultTTL
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultMaxTTL
	}
	if c.RootTTL == 0 {
		c.RootTTL = DefaultRootTTL
	}
	if c.ServingTTL == 0 {
		c.ServingTTL = DefaultServingTTL
	}
	if c.ServingDNSNames == nil {
		c.ServingDNSNames = DefaultServingDNSNames()
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.DefaultTTL < 0 || c.MaxTTL < 0 || c.RootTTL < 0 || c.ServingTTL < 0 || c.PollInterval < 0:
		return errors.New("ca config: durations must not be negative")
	case c.DefaultTTL > c.MaxTTL:
		return fmt.Errorf("ca config: default TTL %v exceeds max TTL %v", c.DefaultTTL, c.MaxTTL)
	case c.PluginCertsDir == "" && c.Client == nil && c.SelfSignedDir == "":
		return errors.New("ca config: no key source: set PluginCertsDir, Client (Kubernetes mode) or SelfSignedDir")
	}
	return nil
}
