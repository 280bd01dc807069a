package ca

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/atomicfile"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// material is the CA's key material as the four files (or Secret keys) Istio uses.
type material struct {
	caCert, caKey, certChain, rootCert []byte
}

func (m material) equal(o material) bool {
	return bytes.Equal(m.caCert, o.caCert) && bytes.Equal(m.caKey, o.caKey) &&
		bytes.Equal(m.certChain, o.certChain) && bytes.Equal(m.rootCert, o.rootCert)
}

// signingState is what signing needs, swapped atomically when the key
// material changes.
type signingState struct {
	issuer *pki.Issuer
	roots  *pki.Bundle
	// chainTail is what follows the leaf in a response: the signing
	// certificate unless it is a root, the intermediates, and last the root
	// bundle as one PEM string.
	chainTail []string
	// source names where the material came from, for logs.
	source string
	raw    material
}

// parseMaterial validates key material: the key matches ca-cert.pem, which
// chains through cert-chain.pem to a root in root-cert.pem (which may hold
// several). An empty root-cert.pem means ca-cert.pem is the root.
func parseMaterial(m material, source string, now time.Time) (*signingState, error) {
	key, err := pki.ParsePrivateKey(m.caKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CAKeyFile, err)
	}
	certs, err := pki.ParseCertificates(m.caCert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CACertFile, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: %w: no certificate", CACertFile, pki.ErrInvalid)
	}
	chain, err := pki.ParseCertificates(m.certChain)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CertChainFile, err)
	}
	chain = append(chain, certs[1:]...)
	var roots *pki.Bundle
	if len(bytes.TrimSpace(m.rootCert)) == 0 {
		roots, err = pki.NewBundle(certs[0])
	} else {
		roots, err = pki.ParseBundle(m.rootCert)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RootCertFile, err)
	}
	issuer, err := pki.NewIssuer(certs[0], key, chain, roots, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	st := &signingState{issuer: issuer, roots: roots, source: source, raw: m}
	if !issuer.Cert.Equal(issuer.Root) {
		st.chainTail = append(st.chainTail, string(pki.EncodeCertificates(issuer.Cert)))
	}
	for _, c := range issuer.Intermediates {
		st.chainTail = append(st.chainTail, string(pki.EncodeCertificates(c)))
	}
	st.chainTail = append(st.chainTail, string(roots.PEM()))
	return st, nil
}

// newSelfSigned generates an ECDSA P-256 root for the trust domain.
func newSelfSigned(trustDomain string, now time.Time, ttl time.Duration) (material, error) {
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return material{}, err
	}
	root, err := pki.NewRoot(key, pkix.Name{Organization: []string{trustDomain}}, now, ttl)
	if err != nil {
		return material{}, err
	}
	keyPEM, err := pki.EncodePrivateKey(key)
	if err != nil {
		return material{}, err
	}
	certPEM := pki.EncodeCertificates(root)
	return material{caCert: certPEM, caKey: keyPEM, rootCert: certPEM}, nil
}

// readDir reads the four files from dir. found is false when ca-cert.pem or
// ca-key.pem is missing; cert-chain.pem and root-cert.pem are optional.
func readDir(dir string) (m material, found bool, err error) {
	files := []struct {
		name     string
		dst      *[]byte
		required bool
	}{
		{CACertFile, &m.caCert, true},
		{CAKeyFile, &m.caKey, true},
		{CertChainFile, &m.certChain, false},
		{RootCertFile, &m.rootCert, false},
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if f.required {
				return material{}, false, nil
			}
		case err != nil:
			return material{}, false, fmt.Errorf("read CA files: %w", err)
		default:
			*f.dst = b
		}
	}
	return m, true, nil
}

// writeDir writes the four files to dir, the key with mode 0600, each
// through a temporary file renamed into place.
func writeDir(dir string, m material) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create CA directory: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CAKeyFile, m.caKey, 0o600},
		{CACertFile, m.caCert, 0o644},
		{CertChainFile, m.certChain, 0o644},
		{RootCertFile, m.rootCert, 0o644},
	} {
		if err := atomicfile.Write(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// secretMaterial reads the material from a Secret's data.
func secretMaterial(s *corev1.Secret) material {
	return material{
		caCert:    s.Data[CACertFile],
		caKey:     s.Data[CAKeyFile],
		certChain: s.Data[CertChainFile],
		rootCert:  s.Data[RootCertFile],
	}
}

// loadOrCreateSecret returns the material in the istio-ca-secret Secret,
// creating the Secret from generate() if it does not exist. When another
// istiod creates it first, that one's root is used.
func loadOrCreateSecret(ctx context.Context, client rest.Interface, ns string, generate func() (material, error)) (m material, created bool, err error) {
	get := func() (*corev1.Secret, error) {
		var s corev1.Secret
		err := client.Get().Namespace(ns).Resource("secrets").Name(SecretName).Do(ctx).Into(&s)
		return &s, err
	}
	s, err := get()
	if err == nil {
		return secretMaterial(s), false, nil
	}
	if !apierrors.IsNotFound(err) {
		return material{}, false, fmt.Errorf("get secret %s/%s: %w", ns, SecretName, err)
	}
	m, err = generate()
	if err != nil {
		return material{}, false, err
	}
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: ns},
		Type:       SecretType,
		Data: map[string][]byte{
			CACertFile:    m.caCert,
			CAKeyFile:     m.caKey,
			CertChainFile: m.certChain,
			RootCertFile:  m.rootCert,
		},
	}
	if err = client.Post().Namespace(ns).Resource("secrets").Body(s).Do(ctx).Error(); err == nil {
		return m, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return material{}, false, fmt.Errorf("create secret %s/%s: %w", ns, SecretName, err)
	}
	s, err = get()
	if err != nil {
		return material{}, false, fmt.Errorf("get secret %s/%s: %w", ns, SecretName, err)
	}
	return secretMaterial(s), false, nil
}
