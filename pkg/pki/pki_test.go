package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustKey(t testing.TB, k KeyType) crypto.Signer {
	t.Helper()
	key, err := GenerateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestKeys(t *testing.T) {
	for _, kt := range []KeyType{ECDSAP256, ECDSAP384, RSA2048} {
		t.Run(kt.String(), func(t *testing.T) {
			back, err := ParseKeyType(kt.String())
			if err != nil || back != kt {
				t.Fatalf("ParseKeyType(%q) = %v, %v", kt, back, err)
			}
			key := mustKey(t, kt)
			data, err := EncodePrivateKey(key)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := ParsePrivateKey(data)
			if err != nil {
				t.Fatal(err)
			}
			if !KeyMatches(key.Public(), parsed) {
				t.Error("parsed key does not match")
			}
		})
	}
	if _, err := ParseKeyType("dsa"); err == nil {
		t.Error("ParseKeyType(dsa) succeeded")
	}
	// SEC 1 and PKCS #1 forms parse too.
	ec := mustKey(t, ECDSAP256).(*ecdsa.PrivateKey)
	der, _ := x509.MarshalECPrivateKey(ec)
	if _, err := ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
		t.Errorf("EC PRIVATE KEY: %v", err)
	}
	r := mustKey(t, RSA2048).(*rsa.PrivateKey)
	if _, err := ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(r)})); err != nil {
		t.Errorf("RSA PRIVATE KEY: %v", err)
	}
	for name, data := range map[string][]byte{
		"garbage":   []byte("not a key"),
		"cert type": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}),
		"bad der":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
		"encrypted": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}}),
	} {
		if _, err := ParsePrivateKey(data); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid", name, err)
		}
	}
}

var testID = &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/default/sa/app"}

func TestCSR(t *testing.T) {
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		t.Run(kt.String(), func(t *testing.T) {
			key := mustKey(t, kt)
			data, err := CreateCSR(key, CSROptions{URIs: []*url.URL{testID}, DNSNames: []string{"app.default.svc"}})
			if err != nil {
				t.Fatal(err)
			}
			csr, err := ParseCSR(data)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"URI:spiffe://cluster.local/ns/default/sa/app", "DNS:app.default.svc"}
			if diff := cmp.Diff(want, SANs(csr)); diff != "" {
				t.Errorf("SANs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCSRRejects(t *testing.T) {
	good, err := CreateCSR(mustKey(t, ECDSAP256), CSROptions{URIs: []*url.URL{testID}})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(good)
	tampered := append([]byte(nil), block.Bytes...)
	// The subject/SAN bytes sit inside the signed part: change one byte of
	// the SPIFFE ID so the signature no longer matches.
	i := strings.Index(string(tampered), "default")
	tampered[i] = 'D'

	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	_ = edPub
	edCSR, err := CreateCSR(edKey, CSROptions{URIs: []*url.URL{testID}})
	if err != nil {
		t.Fatal(err)
	}
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	p224CSR, err := CreateCSR(p224, CSROptions{})
	if err != nil {
		t.Fatal(err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallCSR, err := CreateCSR(small, CSROptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not PEM"},
		{"garbage", []byte("hello"), "not PEM"},
		{"wrong block", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}), `"CERTIFICATE", not CERTIFICATE REQUEST`},
		{"bad der", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 1, 2}}), "parse CSR"},
		{"trailing data", append(append([]byte(nil), good...), "junk"...), "data after"},
		{"two CSRs", append(append([]byte(nil), good...), good...), "data after"},
		{"bad signature", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "signature does not verify"},
		{"ed25519", edCSR, "key type Ed25519 is not allowed"},
		{"p224", p224CSR, "curve P-224 is not allowed"},
		{"rsa1024", smallCSR, "RSA key of 1024 bits"},
		{"huge", make([]byte, maxCSR+1), "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCSR(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

// newCA makes a root and an intermediate signed by it.
func newCA(t testing.TB, now time.Time) (root *Issuer, inter *Issuer) {
	t.Helper()
	rootKey := mustKey(t, ECDSAP256)
	rootCert, err := NewRoot(rootKey, pkix.Name{Organization: []string{"cluster.local"}}, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := NewBundle(rootCert)
	if err != nil {
		t.Fatal(err)
	}
	root, err = NewIssuer(rootCert, rootKey, nil, roots, now)
	if err != nil {
		t.Fatal(err)
	}
	interKey := mustKey(t, ECDSAP256)
	interCert, err := root.Issue(interKey.Public(), LeafOptions{Subject: pkix.Name{CommonName: "inter"}, NotBefore: now, TTL: 12 * time.Hour, IsCA: true})
	if err != nil {
		t.Fatal(err)
	}
	inter, err = NewIssuer(interCert, interKey, []*x509.Certificate{rootCert}, roots, now)
	if err != nil {
		t.Fatal(err)
	}
	return root, inter
}

func TestIssue(t *testing.T) {
	now := time.Now()
	root, inter := newCA(t, now)
	if inter.Root != root.Cert || len(inter.Intermediates) != 0 {
		t.Fatalf("intermediate issuer: root %v, intermediates %d", inter.Root.Subject, len(inter.Intermediates))
	}
	if got := len(root.Chain()); got != 1 {
		t.Errorf("root chain length %d, want 1", got)
	}
	if got := len(inter.Chain()); got != 2 {
		t.Errorf("intermediate chain length %d, want 2", got)
	}
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		leafKey := mustKey(t, kt)
		leaf, err := inter.Issue(leafKey.Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		roots, _ := NewBundle(root.Cert)
		if _, err := roots.Verify(append([]*x509.Certificate{leaf}, inter.Chain()...), now, x509.ExtKeyUsageClientAuth); err != nil {
			t.Errorf("%v leaf does not verify: %v", kt, err)
		}
		if got := leaf.NotAfter.Sub(now.Truncate(time.Second)); got < time.Hour-time.Second || got > time.Hour {
			t.Errorf("leaf lifetime from now = %v, want 1h", got)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != testID.String() {
			t.Errorf("leaf URIs = %v", leaf.URIs)
		}
	}
	// A leaf never outlives its issuer.
	leaf, err := inter.Issue(mustKey(t, ECDSAP256).Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now, TTL: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.NotAfter.Equal(inter.Cert.NotAfter) {
		t.Errorf("leaf NotAfter %v, want the issuer's %v", leaf.NotAfter, inter.Cert.NotAfter)
	}
	if _, err := inter.Issue(mustKey(t, ECDSAP256).Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero TTL: error = %v", err)
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := inter.Issue(edKey.Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now, TTL: time.Hour}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Ed25519 key: error = %v", err)
	}
}

func TestNewIssuerRejects(t *testing.T) {
	now := time.Now()
	root, inter := newCA(t, now)
	other, _ := newCA(t, now)
	roots, _ := NewBundle(root.Cert)
	otherRoots, _ := NewBundle(other.Cert)
	leafKey := mustKey(t, ECDSAP256)
	leaf, err := inter.Issue(leafKey.Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		cert  *x509.Certificate
		key   crypto.Signer
		roots *Bundle
		want  string
	}{
		{"key mismatch", inter.Cert, root.Key, roots, "does not match"},
		{"not a CA", leaf, leafKey, roots, "is not a CA"},
		{"untrusted", inter.Cert, inter.Key, otherRoots, "does not chain to a trusted root"},
		{"nil", nil, nil, roots, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewIssuer(tt.cert, tt.key, nil, tt.roots, now)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewIssuer(inter.Cert, inter.Key, nil, roots, now.Add(13*time.Hour)); err == nil {
		t.Error("expired intermediate accepted")
	}
}

func TestBundle(t *testing.T) {
	now := time.Now()
	rootA, interA := newCA(t, now)
	rootB, _ := newCA(t, now)
	both, err := ParseBundle(append(EncodeCertificates(rootA.Cert), EncodeCertificates(rootB.Cert, rootA.Cert)...))
	if err != nil {
		t.Fatal(err)
	}
	if both.Len() != 2 || !both.Contains(rootA.Cert) || !both.Contains(rootB.Cert) {
		t.Fatalf("bundle holds %d roots", both.Len())
	}
	onlyB, _ := NewBundle(rootB.Cert)
	onlyA, _ := NewBundle(rootA.Cert)
	if !onlyA.Merge(onlyB).Equal(both) {
		t.Error("Merge differs from the parsed bundle")
	}
	leaf, _ := interA.Issue(mustKey(t, ECDSAP256).Public(), LeafOptions{URIs: []*url.URL{testID}, NotBefore: now, TTL: time.Hour})
	chain := append([]*x509.Certificate{leaf}, interA.Chain()...)
	if _, err := both.Verify(chain, now); err != nil {
		t.Errorf("verify against both roots: %v", err)
	}
	if _, err := onlyB.Verify(chain, now); err == nil {
		t.Error("chain to root A verified against root B alone")
	}
	if _, err := both.Verify(chain, now.Add(2*time.Hour)); err == nil {
		t.Error("expired leaf verified")
	}
	if _, err := NewBundle(leaf); !errors.Is(err, ErrInvalid) {
		t.Errorf("leaf as a root: error = %v", err)
	}
	if _, err := ParseBundle([]byte("\n")); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty bundle: error = %v", err)
	}
	var zero *Bundle
	if zero.Len() != 0 || zero.PEM() != nil || zero.Contains(leaf) {
		t.Error("nil bundle is not empty")
	}
}

func TestParseCertificates(t *testing.T) {
	root, inter := newCA(t, time.Now())
	data := EncodeCertificates(inter.Cert, root.Cert)
	certs, err := ParseCertificates(data)
	if err != nil || len(certs) != 2 || !certs[0].Equal(inter.Cert) {
		t.Fatalf("ParseCertificates = %d certs, %v", len(certs), err)
	}
	if certs, err := ParseCertificates([]byte("  \n")); err != nil || len(certs) != 0 {
		t.Errorf("whitespace: %d certs, %v", len(certs), err)
	}
	for name, bad := range map[string][]byte{
		"garbage after": append(append([]byte(nil), data...), "x"...),
		"key block":     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
		"bad der":       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}),
	} {
		if _, err := ParseCertificates(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error = %v", name, err)
		}
	}
	if _, err := ParseCertificate(data); err == nil {
		t.Error("ParseCertificate accepted two certificates")
	}
}

// FuzzParseCSR checks that ParseCSR never panics, that its errors wrap
// ErrInvalid and that what it accepts has a verified signature and an
// allowed key.
func FuzzParseCSR(f *testing.F) {
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		key := mustKey(f, kt)
		data, err := CreateCSR(key, CSROptions{URIs: []*url.URL{testID}, DNSNames: []string{"a.b"}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := ParseCSR(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := csr.CheckSignature(); err != nil {
			t.Fatalf("accepted CSR whose signature fails: %v", err)
		}
		if err := CheckPublicKey(csr.PublicKey); err != nil {
			t.Fatalf("accepted CSR with a refused key: %v", err)
		}
		_ = SANs(csr)
	})
}

// FuzzParseCertificates checks the PEM chain parser and the bundle built
// from it never panic and round-trip what they accept.
func FuzzParseCertificates(f *testing.F) {
	root, inter := newCA(f, time.Now())
	f.Add(EncodeCertificates(inter.Cert, root.Cert))
	f.Add([]byte(""))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := ParseCertificates(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := ParseCertificates(EncodeCertificates(certs...))
		if err != nil || len(again) != len(certs) {
			t.Fatalf("round trip: %d certs, %v", len(again), err)
		}
		if b, err := NewBundle(certs...); err == nil {
			_ = b.Pool()
		}
	})
}

func TestCertificatePEM(t *testing.T) {
	for n := range 300 {
		der := make([]byte, n)
		_, _ = rand.Read(der)
		if got, want := CertificatePEM(der), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); got != want {
			t.Fatalf("%d bytes:\n%s\nwant\n%s", n, got, want)
		}
	}
}
