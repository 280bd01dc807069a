package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
)

// maxCSR bounds the CSR input ParseCSR accepts; a real CSR is under 2 KiB.
const maxCSR = 64 << 10

// CSROptions describes the certificate a CSR asks for.
type CSROptions struct {
	// Subject is the requested subject; Istio workload CSRs leave it empty
	// apart from an optional organization.
	Subject pkix.Name
	// URIs are URI SANs, e.g. the workload's SPIFFE ID.
	URIs []*url.URL
	// DNSNames are DNS SANs.
	DNSNames []string
	// IPAddresses are IP SANs.
	IPAddresses []net.IP
}

// CreateCSR returns a PEM "CERTIFICATE REQUEST" signed by key.
func CreateCSR(key crypto.Signer, opts CSROptions) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     opts.Subject,
		URIs:        opts.URIs,
		DNSNames:    opts.DNSNames,
		IPAddresses: opts.IPAddresses,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// allowedCSRSignatures are the signature algorithms ParseCSR accepts (no
// SHA-1, no MD5).
var allowedCSRSignatures = map[x509.SignatureAlgorithm]bool{
	x509.SHA256WithRSA: true, x509.SHA384WithRSA: true, x509.SHA512WithRSA: true,
	x509.SHA256WithRSAPSS: true, x509.SHA384WithRSAPSS: true, x509.SHA512WithRSAPSS: true,
	x509.ECDSAWithSHA256: true, x509.ECDSAWithSHA384: true, x509.ECDSAWithSHA512: true,
}

// ParseCSR parses and validates one PEM certificate request: exactly one
// "CERTIFICATE REQUEST" (or "NEW CERTIFICATE REQUEST") block and nothing
// else but whitespace, an allowed key type (CheckPublicKey), an allowed
// signature algorithm, and a signature that verifies with the CSR's own key.
// Every error wraps ErrInvalid and says what is wrong.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	if len(data) > maxCSR {
		return nil, fmt.Errorf("%w: CSR is %d bytes (limit %d)", ErrInvalid, len(data), maxCSR)
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: CSR is not PEM", ErrInvalid)
	}
	if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: PEM block is %q, not CERTIFICATE REQUEST", ErrInvalid, block.Type)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: data after the CSR's PEM block", ErrInvalid)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: parse CSR: %v", ErrInvalid, err)
	}
	if err := CheckPublicKey(csr.PublicKey); err != nil {
		return nil, fmt.Errorf("CSR: %w", err)
	}
	if !allowedCSRSignatures[csr.SignatureAlgorithm] {
		return nil, fmt.Errorf("%w: CSR signature algorithm %v is not allowed", ErrInvalid, csr.SignatureAlgorithm)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: CSR signature does not verify: %v", ErrInvalid, err)
	}
	return csr, nil
}

// SANs returns a CSR's subject alternative names, each prefixed with its
// kind as OpenSSL prints them: "URI:spiffe://...", "DNS:name", "IP:addr",
// "email:addr".
func SANs(csr *x509.CertificateRequest) []string {
	var out []string
	for _, u := range csr.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, d := range csr.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range csr.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, e := range csr.EmailAddresses {
		out = append(out, "email:"+e)
	}
	return out
}
