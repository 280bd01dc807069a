package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/grpcwire"
)

// dialIstiod connects (lazily) to the discovery address: plaintext with
// controlPlaneAuthPolicy NONE, else TLS verified against the mesh root,
// presenting the workload certificate once there is one, and the
// service-account token.
func dialIstiod(cfg *config.Config, current func() *certs.Cert) (*grpcwire.Conn, error) {
	addr := cfg.Proxy.DiscoveryAddress
	if cfg.Plaintext {
		return grpcwire.Dial(addr, grpcwire.DialOptions{})
	}
	host, _, _ := strings.Cut(addr, ":")
	if cfg.IstiodSAN != "" {
		host = cfg.IstiodSAN
	}
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := current()
			if c == nil {
				return &tls.Certificate{}, nil // none yet: the token authenticates
			}
			tc, err := c.TLS()
			return &tc, err
		},
	}
	if path := rootsPath(cfg, cfg.XDSRootsPath()); path != "" { // "": the system's (XDS_ROOT_CA=SYSTEM)
		pool, err := certs.ReadRoots(path)
		if err != nil {
			return nil, fmt.Errorf("istiod's root certificate (XDS_ROOT_CA, default the mounted mesh root): %w", err)
		}
		tlsCfg.RootCAs = pool
	}
	// No read buffer: tls.Conn already holds each record it decrypts.
	return grpcwire.Dial(addr, grpcwire.DialOptions{TLS: tlsCfg, Metadata: tokenCreds{path: cfg.Path(cfg.TokenPath)}.metadata})
}

// rootsPath is the file of roots (XDS_ROOT_CA, CA_ROOT_CA) under the
// agent's directory, or "" for the system's.
func rootsPath(cfg *config.Config, roots string) string {
	if roots == config.SystemRoots {
		return ""
	}
	return cfg.Path(roots)
}

// tokenCreds sends the (rotating) service-account token with every call.
type tokenCreds struct{ path string }

func (t tokenCreds) metadata(context.Context) (map[string]string, error) {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return nil, nil // no token: the certificate may do
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(b))}, nil
}
