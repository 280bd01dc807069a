package pki

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"slices"
	"time"
)

// Bundle is an immutable, ordered set of trusted root certificates. During a
// root rotation it holds both the old and the new root, so certificates
// chaining to either verify. The zero value is an empty bundle.
type Bundle struct {
	certs []*x509.Certificate
	pool  *x509.CertPool
	pem   []byte
}

// NewBundle returns a bundle of CA certificates, in order, without
// duplicates. Each must be a CA certificate.
func NewBundle(certs ...*x509.Certificate) (*Bundle, error) {
	b := &Bundle{pool: x509.NewCertPool()}
	for i, c := range certs {
		if c == nil {
			return nil, fmt.Errorf("%w: root %d is nil", ErrInvalid, i+1)
		}
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, fmt.Errorf("%w: root %d (%s) is not a CA certificate", ErrInvalid, i+1, c.Subject)
		}
		if b.Contains(c) {
			continue
		}
		b.certs = append(b.certs, c)
		b.pool.AddCert(c)
	}
	b.pem = EncodeCertificates(b.certs...)
	return b, nil
}

// ParseBundle parses PEM root certificates into a bundle; it must hold at least one.
func ParseBundle(data []byte) (*Bundle, error) {
	certs, err := ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("root bundle: %w", err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: root bundle holds no certificate", ErrInvalid)
	}
	return NewBundle(certs...)
}

// Certificates returns the roots in order (a copy of the slice).
func (b *Bundle) Certificates() []*x509.Certificate {
	if b == nil {
		return nil
	}
	return slices.Clone(b.certs)
}

// Len returns the number of roots.
func (b *Bundle) Len() int {
	if b == nil {
		return 0
	}
	return len(b.certs)
}

// Pool returns the roots as a pool for x509.VerifyOptions. Callers must not
// modify it.
func (b *Bundle) Pool() *x509.CertPool {
	if b == nil || b.pool == nil {
		return x509.NewCertPool()
	}
	return b.pool
}

// PEM returns the roots as consecutive PEM blocks. Callers must not modify it.
func (b *Bundle) PEM() []byte {
	if b == nil {
		return nil
	}
	return b.pem
}

// Contains reports whether c is one of the roots.
func (b *Bundle) Contains(c *x509.Certificate) bool {
	if b == nil {
		return false
	}
	return slices.ContainsFunc(b.certs, func(r *x509.Certificate) bool { return bytes.Equal(r.Raw, c.Raw) })
}

// Equal reports whether two bundles hold the same roots in the same order.
func (b *Bundle) Equal(o *Bundle) bool {
	return bytes.Equal(b.PEM(), o.PEM())
}

// Merge returns a bundle with b's roots followed by those of o not in b.
func (b *Bundle) Merge(o *Bundle) *Bundle {
	m, _ := NewBundle(append(b.Certificates(), o.Certificates()...)...)
	return m
}

// Verify verifies a chain (leaf first, then intermediates in any order)
// against the roots at time now, for the given extended key usages (none
// means any). It returns the verified chains.
func (b *Bundle) Verify(chain []*x509.Certificate, now time.Time, usages ...x509.ExtKeyUsage) ([][]*x509.Certificate, error) {
	if len(chain) == 0 {
		return nil, fmt.Errorf("%w: empty certificate chain", ErrInvalid)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	}
	chains, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         b.Pool(),
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     usages,
	})
	if err != nil {
		return nil, fmt.Errorf("verify certificate chain: %w", err)
	}
	return chains, nil
}
