package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// ClockSkew is how far before the moment of issue a certificate's validity
// starts, so that peers whose clocks are a little behind accept it.
const ClockSkew = time.Minute

// NewSerial returns a random positive 127-bit serial number.
func NewSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b), nil
}

// NewRoot returns a self-signed root CA certificate for key, valid from now
// (less ClockSkew) for ttl.
func NewRoot(key crypto.Signer, subject pkix.Name, now time.Time, ttl time.Duration) (*x509.Certificate, error) {
	serial, err := NewSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create root certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

// Issuer signs certificates with a CA certificate and its private key.
type Issuer struct {
	// Cert is the signing CA certificate.
	Cert *x509.Certificate
	// Key is Cert's private key.
	Key crypto.Signer
	// Intermediates are the certificates between Cert and Root, nearest to
	// Cert first; empty when Root signed Cert or Cert is Root.
	Intermediates []*x509.Certificate
	// Root is the self-signed root Cert chains to (Cert itself for a root CA).
	Root *x509.Certificate
}

// NewIssuer checks that key belongs to cert, that cert may sign
// certificates, and that cert chains through intermediates (in any order,
// may include cert itself and roots) to one of roots, valid at now. It
// returns an issuer whose Intermediates are in chain order.
func NewIssuer(cert *x509.Certificate, key crypto.Signer, intermediates []*x509.Certificate, roots *Bundle, now time.Time) (*Issuer, error) {
	if cert == nil || key == nil {
		return nil, fmt.Errorf("%w: CA certificate and key are required", ErrInvalid)
	}
	if !KeyMatches(cert.PublicKey, key) {
		return nil, fmt.Errorf("%w: CA key does not match CA certificate %s", ErrInvalid, cert.Subject)
	}
	if err := CheckPublicKey(cert.PublicKey); err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("%w: certificate %s is not a CA", ErrInvalid, cert.Subject)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: CA certificate %s lacks the certSign key usage", ErrInvalid, cert.Subject)
	}
	chains, err := roots.Verify(append([]*x509.Certificate{cert}, intermediates...), now)
	if err != nil {
		return nil, fmt.Errorf("%w: CA certificate %s does not chain to a trusted root: %v", ErrInvalid, cert.Subject, err)
	}
	chain := chains[0] // cert, intermediates..., root
	is := &Issuer{Cert: cert, Key: key, Root: chain[len(chain)-1]}
	if len(chain) > 2 {
		is.Intermediates = chain[1 : len(chain)-1]
	}
	return is, nil
}

// Chain returns the certificates from Cert up to and including Root.
func (is *Issuer) Chain() []*x509.Certificate {
	out := []*x509.Certificate{is.Cert}
	out = append(out, is.Intermediates...)
	if !is.Cert.Equal(is.Root) {
		out = append(out, is.Root)
	}
	return out
}

// LeafOptions describes a certificate to issue.
type LeafOptions struct {
	// URIs and DNSNames are the certificate's subject alternative names.
	URIs     []*url.URL
	DNSNames []string
	// IPAddresses are IP SANs.
	IPAddresses []net.IP
	// Subject is the certificate's subject; empty for workload certificates,
	// which makes the SAN extension critical.
	Subject pkix.Name
	// NotBefore is the moment of issue; the certificate is valid from
	// ClockSkew before it until NotBefore+TTL.
	NotBefore time.Time
	// TTL is the certificate's lifetime.
	TTL time.Duration
	// IsCA issues an intermediate CA certificate instead of a leaf.
	IsCA bool
}

// Issue signs a certificate for pub. A leaf gets the digitalSignature (and
// for RSA keyEncipherment) key usage and both serverAuth and clientAuth
// extended key usages, as mesh certificates serve both ends of mTLS; with
// an empty subject its SAN extension is critical. An intermediate (IsCA)
// gets the certSign and cRLSign key usages. Validity is cut at the issuer's
// expiry.
func (is *Issuer) Issue(pub crypto.PublicKey, opts LeafOptions) (*x509.Certificate, error) {
	var (
		der []byte
		err error
	)
	if opts.IsCA {
		der, err = is.issueCA(pub, opts)
	} else {
		der, err = is.IssueLeafDER(pub, opts)
	}
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse signed certificate: %w", err)
	}
	return cert, nil
}

// issueCA signs an intermediate CA certificate with x509.CreateCertificate.
func (is *Issuer) issueCA(pub crypto.PublicKey, opts LeafOptions) ([]byte, error) {
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("%w: certificate lifetime %v is not positive", ErrInvalid, opts.TTL)
	}
	serial, err := NewSerial()
	if err != nil {
		return nil, err
	}
	notAfter := opts.NotBefore.Add(opts.TTL)
	if notAfter.After(is.Cert.NotAfter) {
		notAfter = is.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               opts.Subject,
		NotBefore:             opts.NotBefore.Add(-ClockSkew),
		NotAfter:              notAfter,
		URIs:                  opts.URIs,
		DNSNames:              opts.DNSNames,
		IPAddresses:           opts.IPAddresses,
		BasicConstraintsValid: true,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.Cert, pub, is.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	return der, nil
}
