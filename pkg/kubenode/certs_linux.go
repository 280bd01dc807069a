package kubenode

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// certFiles are the node's PKI files under dir/pki.
type certFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, SAKey, SAPub string
}

// writePKI makes the cluster CA, the API server's serving certificate (for
// loopback, the node address and the kubernetes Service address), the
// client certificate the API server presents to the kubelet
// (system:masters), and the service-account signing key.
func writePKI(dir string, ips []net.IP) (certFiles, error) {
	p := filepath.Join(dir, "pki")
	f := certFiles{
		CA: filepath.Join(p, "ca.crt"), ServerCert: filepath.Join(p, "apiserver.crt"), ServerKey: filepath.Join(p, "apiserver.key"),
		ClientCert: filepath.Join(p, "kubelet-client.crt"), ClientKey: filepath.Join(p, "kubelet-client.key"),
		SAKey: filepath.Join(p, "sa.key"), SAPub: filepath.Join(p, "sa.pub"),
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		return f, err
	}
	now := time.Now()
	caKey, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return f, err
	}
	root, err := pki.NewRoot(caKey, pkix.Name{CommonName: "skiff-node-ca"}, now, 7*24*time.Hour)
	if err != nil {
		return f, err
	}
	roots, err := pki.NewBundle(root)
	if err != nil {
		return f, err
	}
	is, err := pki.NewIssuer(root, caKey, nil, roots, now)
	if err != nil {
		return f, err
	}
	leaf := func(certPath, keyPath string, opts pki.LeafOptions) error {
		key, err := pki.GenerateKey(pki.ECDSAP256)
		if err != nil {
			return err
		}
		opts.NotBefore, opts.TTL = now, 24*time.Hour
		c, err := is.Issue(key.Public(), opts)
		if err != nil {
			return err
		}
		return writeCertKey(certPath, keyPath, c, key)
	}
	saKey, err := pki.GenerateKey(pki.RSA2048)
	if err != nil {
		return f, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return f, err
	}
	saPEM, err := pki.EncodePrivateKey(saKey)
	if err != nil {
		return f, err
	}
	err = errors.Join(
		os.WriteFile(f.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), 0o644),
		leaf(f.ServerCert, f.ServerKey, pki.LeafOptions{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPAddresses: ips,
		}),
		leaf(f.ClientCert, f.ClientKey, pki.LeafOptions{
			Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		}),
		os.WriteFile(f.SAKey, saPEM, 0o600),
		os.WriteFile(f.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o644),
	)
	if err != nil {
		return f, fmt.Errorf("node PKI: %w", err)
	}
	return f, nil
}

func writeCertKey(certPath, keyPath string, c *x509.Certificate, key crypto.Signer) error {
	k, err := pki.EncodePrivateKey(key)
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644),
		os.WriteFile(keyPath, k, 0o600),
	)
}
