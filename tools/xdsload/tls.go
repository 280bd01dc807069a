package main

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// sidecarTLS returns, per namespace, the credentials of a sidecar on
// istiod's TLS port (15012): a workload certificate signed by the root
// istiod generated in caDir, presented as the client certificate, and that
// root as the only one trusted for istiod's serving certificate. One
// certificate serves all of a namespace's clients: the handshakes, not the
// identities, are what istiod pays for.
func sidecarTLS(caDir string, namespaces []string) (map[string]credentials.TransportCredentials, error) {
	certPEM, err := os.ReadFile(filepath.Join(caDir, ca.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("istiod's CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(caDir, ca.CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("istiod's CA: %w", err)
	}
	root, err := pki.ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("istiod's CA %s: %w", ca.CACertFile, err)
	}
	rootKey, err := pki.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("istiod's CA %s: %w", ca.CAKeyFile, err)
	}
	roots, err := pki.NewBundle(root)
	if err != nil {
		return nil, err
	}
	issuer, err := pki.NewIssuer(root, rootKey, nil, roots, time.Now())
	if err != nil {
		return nil, err
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return nil, err
	}
	out := make(map[string]credentials.TransportCredentials, len(namespaces))
	for _, ns := range namespaces {
		// istiod gives a certificate only its own namespace's nodes.
		id := &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/" + ns + "/sa/xdsload"}
		leaf, err := issuer.Issue(key.Public(), pki.LeafOptions{URIs: []*url.URL{id}, NotBefore: time.Now(), TTL: 24 * time.Hour})
		if err != nil {
			return nil, fmt.Errorf("certificate for namespace %s: %w", ns, err)
		}
		out[ns] = credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}},
			RootCAs:      roots.Pool(),
			ServerName:   "istiod.istio-system.svc",
			MinVersion:   tls.VersionTLS12,
		})
	}
	return out, nil
}
