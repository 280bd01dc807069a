package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// referenceLeaf signs the same leaf with x509.CreateCertificate.
func referenceLeaf(t *testing.T, is *Issuer, pub crypto.PublicKey, opts LeafOptions, serial *x509.Certificate) *x509.Certificate {
	t.Helper()
	ku := x509.KeyUsageDigitalSignature
	if strings.HasPrefix(pubType(pub), "RSA") {
		ku |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.SerialNumber,
		Subject:               opts.Subject,
		NotBefore:             opts.NotBefore.Add(-ClockSkew),
		NotAfter:              opts.NotBefore.Add(opts.TTL),
		URIs:                  opts.URIs,
		DNSNames:              opts.DNSNames,
		IPAddresses:           opts.IPAddresses,
		BasicConstraintsValid: true,
		KeyUsage:              ku,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.Cert, pub, is.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pubType(pub crypto.PublicKey) string {
	if _, ok := pub.(interface{ Size() int }); ok {
		return "RSA"
	}
	return "EC"
}

// TestIssueLeafDERMatchesCreateCertificate checks that the direct encoder
// produces the certificate x509.CreateCertificate would: same fields, same
// extensions byte for byte, same signature algorithm; and that openssl
// parses and verifies it.
func TestIssueLeafDERMatchesCreateCertificate(t *testing.T) {
	now := time.Now()
	rootEC, interEC := newCA(t, now)
	rsaRootKey := mustKey(t, RSA2048)
	rsaRootCert, err := NewRoot(rsaRootKey, pkix.Name{CommonName: "rsa root"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rsaRoots, _ := NewBundle(rsaRootCert)
	rootRSA, err := NewIssuer(rsaRootCert, rsaRootKey, nil, rsaRoots, now)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("spiffe://cluster.local/ns/default/sa/app")
	for _, tc := range []struct {
		name   string
		issuer *Issuer
		kt     KeyType
		opts   LeafOptions
	}{
		{"ec leaf from ec intermediate", interEC, ECDSAP256, LeafOptions{URIs: []*url.URL{u}}},
		{"rsa leaf from ec root", rootEC, RSA2048, LeafOptions{URIs: []*url.URL{u}}},
		{"ec leaf from rsa root", rootRSA, ECDSAP256, LeafOptions{URIs: []*url.URL{u}}},
		{"serving names", interEC, ECDSAP256, LeafOptions{DNSNames: []string{"istiod.istio-system.svc", "istiod"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}}},
		{"with subject", interEC, ECDSAP384, LeafOptions{Subject: pkix.Name{Organization: []string{"cluster.local"}}, URIs: []*url.URL{u}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := mustKey(t, tc.kt)
			tc.opts.NotBefore, tc.opts.TTL = now, 30*time.Minute
			got, err := tc.issuer.Issue(key.Public(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := referenceLeaf(t, tc.issuer, key.Public(), tc.opts, got)
			if err := got.CheckSignatureFrom(tc.issuer.Cert); err != nil {
				t.Fatalf("signature: %v", err)
			}
			type fields struct {
				Version                         int
				SigAlg                          x509.SignatureAlgorithm
				Issuer, Subject                 string
				NotBefore, NotAfter             time.Time
				KeyUsage                        x509.KeyUsage
				ExtKeyUsage                     []x509.ExtKeyUsage
				BasicConstraintsValid, IsCA     bool
				AuthorityKeyID, SubjectKeyID    []byte
				URIs                            []string
				DNSNames                        []string
				IPs                             []string
				RawSubjectPublicKeyInfo, RawIss []byte
			}
			f := func(c *x509.Certificate) fields {
				var uris, ips []string
				for _, u := range c.URIs {
					uris = append(uris, u.String())
				}
				for _, ip := range c.IPAddresses {
					ips = append(ips, ip.String())
				}
				return fields{c.Version, c.SignatureAlgorithm, c.Issuer.String(), c.Subject.String(), c.NotBefore, c.NotAfter,
					c.KeyUsage, c.ExtKeyUsage, c.BasicConstraintsValid, c.IsCA, c.AuthorityKeyId, c.SubjectKeyId,
					uris, c.DNSNames, ips, c.RawSubjectPublicKeyInfo, c.RawIssuer}
			}
			if diff := cmp.Diff(f(want), f(got)); diff != "" {
				t.Errorf("fields (-CreateCertificate +IssueLeafDER):\n%s", diff)
			}
			sortExt := func(c *x509.Certificate) []pkix.Extension {
				e := slices.Clone(c.Extensions)
				slices.SortFunc(e, func(a, b pkix.Extension) int { return strings.Compare(a.Id.String(), b.Id.String()) })
				return e
			}
			if diff := cmp.Diff(sortExt(want), sortExt(got)); diff != "" {
				t.Errorf("extensions (-CreateCertificate +IssueLeafDER):\n%s", diff)
			}
			if !bytes.Equal(want.RawSubject, got.RawSubject) {
				t.Errorf("raw subject %x, want %x", got.RawSubject, want.RawSubject)
			}
			opensslParse(t, tc.issuer, got)
		})
	}
	// Neither subject nor SAN: RFC 5280 forbids it, openssl -x509_strict refuses it.
	if _, err := interEC.Issue(mustKey(t, ECDSAP256).Public(), LeafOptions{NotBefore: now, TTL: time.Hour}); err == nil {
		t.Error("issued a certificate with neither subject nor SAN")
	}
}

// opensslParse has the openssl binary verify the leaf against its issuer's chain.
func opensslParse(t *testing.T, is *Issuer, leaf *x509.Certificate) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root.pem")
	inter := filepath.Join(dir, "inter.pem")
	leafFile := filepath.Join(dir, "leaf.pem")
	chain := is.Chain()
	if err := os.WriteFile(root, EncodeCertificates(chain[len(chain)-1]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inter, EncodeCertificates(chain[:len(chain)-1]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leafFile, EncodeCertificates(leaf), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "-x509_strict", "-CAfile", root}
	if len(chain) > 1 {
		args = append(args, "-untrusted", inter)
	}
	out, err := exec.Command("openssl", append(args, leafFile)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl verify: %v\n%s", err, out)
	}
}
