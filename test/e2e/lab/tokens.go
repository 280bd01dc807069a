package lab

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// TokenIssuer plays the Kubernetes API server's part for file-mode istiod:
// it signs service-account tokens that istiod's JWT verifier accepts.
type TokenIssuer struct {
	Issuer string
	// PublicKeyFile is the key to give istiod (--jwt-public-key).
	PublicKeyFile string
	key           crypto.Signer
}

// NewTokenIssuer makes a signing key and writes its public half into the lab.
func (l *Lab) NewTokenIssuer() (*TokenIssuer, error) {
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	path := filepath.Join(l.Dir, "token-signer.pub")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	return &TokenIssuer{Issuer: "https://skiff.lab", PublicKeyFile: path, key: key}, nil
}

// Token signs a token for namespace/serviceAccount with audience istio-ca, valid for a day.
func (ti *TokenIssuer) Token(namespace, serviceAccount string) (string, error) {
	now := time.Now()
	return ca.SignToken(ti.key, ca.TokenClaims{Issuer: ti.Issuer, Audiences: []string{"istio-ca"},
		Namespace: namespace, ServiceAccount: serviceAccount, IssuedAt: now, Expiry: now.Add(24 * time.Hour)})
}
