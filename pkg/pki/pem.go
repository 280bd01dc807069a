package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
)

// maxPEM bounds the PEM input the parsers accept (a long chain is a few KiB).
const maxPEM = 1 << 20

// EncodeCertificates returns the certificates as consecutive "CERTIFICATE"
// PEM blocks, in order.
func EncodeCertificates(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// CertificatePEM returns der as one "CERTIFICATE" PEM block, the text
// pem.EncodeToMemory writes for it, built with a single allocation.
func CertificatePEM(der []byte) string {
	const begin, end = "-----BEGIN CERTIFICATE-----\n", "-----END CERTIFICATE-----\n"
	const lineBytes = 48 // 64 base64 characters
	n := base64.StdEncoding.EncodedLen(len(der))
	var b strings.Builder
	b.Grow(len(begin) + n + (n+63)/64 + len(end))
	b.WriteString(begin)
	var line [64 + 1]byte
	for len(der) > 0 {
		chunk := der[:min(lineBytes, len(der))]
		der = der[len(chunk):]
		w := base64.StdEncoding.EncodedLen(len(chunk))
		base64.StdEncoding.Encode(line[:w], chunk)
		line[w] = '\n'
		b.Write(line[:w+1])
	}
	b.WriteString(end)
	return b.String()
}

// ParseCertificates parses every PEM block in data as a certificate, in
// order. Blocks of another type and text that is not PEM (other than
// whitespace) are errors; input with no block at all returns no
// certificates and no error (an empty cert-chain.pem is valid).
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	if len(data) > maxPEM {
		return nil, fmt.Errorf("%w: PEM data is %d bytes (limit %d)", ErrInvalid, len(data), maxPEM)
	}
	var certs []*x509.Certificate
	rest := data
	for n := 1; ; n++ {
		if len(bytes.TrimSpace(rest)) == 0 {
			return certs, nil
		}
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("%w: text after certificate %d is not PEM", ErrInvalid, n-1)
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: PEM block %d is %q, not CERTIFICATE", ErrInvalid, n, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrInvalid, n, err)
		}
		certs = append(certs, c)
	}
}

// ParseCertificate parses data that must hold exactly one PEM certificate.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	certs, err := ParseCertificates(data)
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("%w: want one certificate, found %d", ErrInvalid, len(certs))
	}
	return certs[0], nil
}
