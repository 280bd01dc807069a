package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
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
	p384Key := mustKey(t, ECDSAP384)
	p384Cert, err := NewRoot(p384Key, pkix.Name{CommonName: "p-384 root"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p384Roots, _ := NewBundle(p384Cert)
	rootP384, err := NewIssuer(p384Cert, p384Key, nil, p384Roots, now)
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
		{"rsa-4096 leaf", interEC, RSA4096, LeafOptions{URIs: []*url.URL{u}}},
		{"p-384 issuer", rootP384, RSA3072, LeafOptions{URIs: []*url.URL{u}}},
		// SAN lists whose encodings pass 127 and 255 bytes (long-form
		// lengths at every level).
		{"many names", interEC, ECDSAP256, LeafOptions{URIs: []*url.URL{u}, DNSNames: manyNames(6)}},
		{"more names", interEC, ECDSAP256, LeafOptions{DNSNames: manyNames(40)}},
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
			if !bytes.Equal(want.RawTBSCertificate, got.RawTBSCertificate) {
				t.Errorf("TBSCertificate differs from x509.CreateCertificate's:\n got %x\nwant %x", got.RawTBSCertificate, want.RawTBSCertificate)
			}
			opensslParse(t, tc.issuer, got)
		})
	}
	// Neither subject nor SAN: RFC 5280 forbids it, openssl -x509_strict refuses it.
	if _, err := interEC.Issue(mustKey(t, ECDSAP256).Public(), LeafOptions{NotBefore: now, TTL: time.Hour}); err == nil {
		t.Error("issued a certificate with neither subject nor SAN")
	}
}

func manyNames(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("service-%d.namespace.svc.cluster.local", i))
	}
	return names
}

// TestSubjectPublicKeyInfo checks the direct key encoding against
// x509.MarshalPKIXPublicKey.
func TestSubjectPublicKeyInfo(t *testing.T) {
	for _, kt := range []KeyType{ECDSAP256, ECDSAP384, RSA2048, RSA3072, RSA4096} {
		for i := range 4 {
			pub := mustKey(t, kt).Public()
			var d derBuf
			if err := d.subjectPublicKeyInfo(pub); err != nil {
				t.Fatal(err)
			}
			want, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d.b, want) {
				t.Errorf("%v key %d: got %x, want %x", kt, i, d.b, want)
			}
		}
	}
	pub := mustKey(t, RSA2048).Public().(*rsa.PublicKey)
	for _, e := range []int{3, 127, 128, 255, 256, 65537, 1<<31 - 1} {
		k := &rsa.PublicKey{N: pub.N, E: e}
		var d derBuf
		if err := d.subjectPublicKeyInfo(k); err != nil {
			t.Fatal(err)
		}
		if want, _ := x509.MarshalPKIXPublicKey(k); !bytes.Equal(d.b, want) {
			t.Errorf("exponent %d: got %x, want %x", e, d.b, want)
		}
	}
}

// TestDERLengths checks derBuf's length forms against encoding/asn1.
func TestDERLengths(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 255, 256, 1000, 65535, 65536, 70000} {
		content := bytes.Repeat([]byte{7}, n)
		want, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagOctetString, Bytes: content})
		if err != nil {
			t.Fatal(err)
		}
		var open, header derBuf
		start := open.open(tagOctetString)
		open.raw(content)
		open.close(start)
		header.bytes(tagOctetString, content)
		if !bytes.Equal(open.b, want) || !bytes.Equal(header.b, want) {
			t.Errorf("length %d: open/close %x, header %x, want %x", n, open.b[:min(len(open.b), 8)], header.b[:min(len(header.b), 8)], want[:8])
		}
	}
	for _, v := range [][]byte{nil, {0}, {0, 0}, {1}, {0x7f}, {0x80}, {0, 0x80}, {0, 0, 1, 2}, {0xff, 0}} {
		var d derBuf
		d.unsigned(v)
		if want := mustMarshal(new(big.Int).SetBytes(v)); !bytes.Equal(d.b, want) {
			t.Errorf("integer %x: got %x, want %x", v, d.b, want)
		}
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
