package ca

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const appID = "spiffe://cluster.local/ns/default/sa/app"

// TestCreateCertificate signs ECDSA and RSA CSRs over real gRPC, and checks
// the chain with crypto/x509 and openssl, the SAN and the lifetime.
func TestCreateCertificate(t *testing.T) {
	tk := newTokenKey(t)
	c := newFileCA(t, tk, nil)
	cl := client(t, serve(t, c), c.Roots(), nil)
	ctx := withToken(ctxT(t), tk.token(t, "default", "app"))
	tests := []struct {
		name     string
		kt       pki.KeyType
		validity int64
		wantTTL  time.Duration
	}{
		{"ecdsa default ttl", pki.ECDSAP256, 0, 24 * time.Hour},
		{"ecdsa 1h", pki.ECDSAP256, 3600, time.Hour},
		{"rsa 2048 12h", pki.RSA2048, 12 * 3600, 12 * time.Hour},
		{"capped at 90 days", pki.ECDSAP256, 200 * 24 * 3600, 90 * 24 * time.Hour},
		{"huge validity capped", pki.ECDSAP256, 1 << 62, 90 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, csr := newCSR(t, tt.kt, appID)
			before := time.Now().Truncate(time.Second)
			resp, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: tt.validity})
			if err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			leaf, inter, roots := parseChain(t, resp.CertChain)
			if len(inter) != 0 || !roots.Equal(c.Roots()) {
				t.Errorf("chain: %d intermediates, roots %d; want leaf and the CA's root", len(inter), roots.Len())
			}
			if _, err := c.Roots().Verify([]*x509.Certificate{leaf}, time.Now(), x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth); err != nil {
				t.Errorf("crypto/x509: %v", err)
			}
			opensslVerify(t, resp.CertChain, c.Roots())
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != appID || len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
				t.Errorf("SANs: URIs %v DNS %v IP %v email %v; want exactly %s", leaf.URIs, leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses, appID)
			}
			if leaf.NotAfter.Before(before.Add(tt.wantTTL)) || leaf.NotAfter.After(after.Add(tt.wantTTL)) {
				t.Errorf("NotAfter %v, want issue time + %v (issued between %v and %v)", leaf.NotAfter, tt.wantTTL, before, after)
			}
			if got := c.Issuer(); !bytes.Equal(leaf.RawIssuer, got.RawSubject) {
				t.Errorf("leaf issuer %v, want %v", leaf.Issuer, got.Subject)
			}
		})
	}
}

// TestCreateCertificateRefused checks that bad input is InvalidArgument, a
// foreign SAN PermissionDenied, a bad credential Unauthenticated, and that
// nothing is signed in any of these cases.
func TestCreateCertificateRefused(t *testing.T) {
	tk := newTokenKey(t)
	c := newFileCA(t, tk, nil)
	cl := client(t, serve(t, c), c.Roots(), nil)
	good := tk.token(t, "default", "app")

	_, csr := newCSR(t, pki.ECDSAP256, appID)
	_, otherCSR := newCSR(t, pki.ECDSAP256, "spiffe://cluster.local/ns/default/sa/admin")
	_, twoCSR := newCSR(t, pki.ECDSAP256, appID, "spiffe://cluster.local/ns/kube-system/sa/admin")
	_, tdCSR := newCSR(t, pki.ECDSAP256, "spiffe://evil.org/ns/default/sa/app")
	dnsKey, _ := pki.GenerateKey(pki.ECDSAP256)
	dnsCSR, _ := pki.CreateCSR(dnsKey, pki.CSROptions{DNSNames: []string{"istiod.istio-system.svc"}})
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edCSR, _ := pki.CreateCSR(edKey, pki.CSROptions{})
	block, _ := pem.Decode([]byte(csr))
	tampered := bytes.Replace(block.Bytes, []byte("sa/app"), []byte("sa/adm"), 1)
	badSig := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}))

	other := newTokenKey(t)
	expired, _ := SignToken(tk.key, TokenClaims{Issuer: tk.issuer, Audiences: []string{"istio-ca"}, Namespace: "default", ServiceAccount: "app",
		IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Hour)})
	wrongAud, _ := SignToken(tk.key, TokenClaims{Issuer: tk.issuer, Audiences: []string{"api"}, Namespace: "default", ServiceAccount: "app",
		IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)})

	tests := []struct {
		name     string
		token    string
		csr      string
		validity int64
		code     codes.Code
		msg      string
	}{
		{"garbage PEM", good, "hello", 0, codes.InvalidArgument, "CSR is not PEM"},
		{"empty CSR", good, "", 0, codes.InvalidArgument, "CSR is not PEM"},
		{"bad signature", good, badSig, 0, codes.InvalidArgument, "signature does not verify"},
		{"unknown key type", good, string(edCSR), 0, codes.InvalidArgument, "key type Ed25519 is not allowed"},
		{"validity -1", good, csr, -1, codes.InvalidArgument, "validity_duration -1 is negative"},
		{"other service account", good, otherCSR, 0, codes.PermissionDenied, `SAN "URI:spiffe://cluster.local/ns/default/sa/admin"`},
		{"extra SAN", good, twoCSR, 0, codes.PermissionDenied, `SAN "URI:spiffe://cluster.local/ns/kube-system/sa/admin"`},
		{"other trust domain", good, tdCSR, 0, codes.PermissionDenied, `SAN "URI:spiffe://evil.org/ns/default/sa/app"`},
		{"DNS SAN", good, string(dnsCSR), 0, codes.PermissionDenied, `SAN "DNS:istiod.istio-system.svc"`},
		{"no credential", "", csr, 0, codes.Unauthenticated, "no bearer token"},
		{"untrusted signer", other.token(t, "default", "app"), csr, 0, codes.Unauthenticated, "does not verify with any trusted key"},
		{"expired token", expired, csr, 0, codes.Unauthenticated, "token expired"},
		{"wrong audience", wrongAud, csr, 0, codes.Unauthenticated, "audiences [api] do not include [istio-ca]"},
		{"not a JWT", "abc", csr, 0, codes.Unauthenticated, "not a JWS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Stats()
			ctx := ctxT(t)
			if tt.token != "" {
				ctx = withToken(ctx, tt.token)
			}
			resp, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: tt.csr, ValidityDuration: tt.validity})
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.code, tt.msg)
			}
			if resp != nil {
				t.Errorf("response %v with an error", resp)
			}
			if after := c.Stats(); after.Issued != before.Issued || after.Refused != before.Refused+1 {
				t.Errorf("stats went from %+v to %+v, want one refusal and nothing issued", before, after)
			}
		})
	}
}

// TestRenewWithCertificate renews over mTLS with the current certificate,
// and refuses expired, foreign and untrusted certificates.
func TestRenewWithCertificate(t *testing.T) {
	tk := newTokenKey(t)
	c := newFileCA(t, tk, nil)
	addr := serve(t, c)

	key, csr := newCSR(t, pki.ECDSAP256, appID)
	resp, err := client(t, addr, c.Roots(), nil).CreateCertificate(withToken(ctxT(t), tk.token(t, "default", "app")),
		&pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 3600})
	if err != nil {
		t.Fatal(err)
	}
	current := tlsCert(t, key, resp.CertChain)

	// Renewal: no token, the current certificate over mTLS.
	key2, csr2 := newCSR(t, pki.ECDSAP256, appID)
	resp2, err := client(t, addr, c.Roots(), current).CreateCertificate(ctxT(t), &pb.IstioCertificateRequest{Csr: csr2, ValidityDuration: 3600})
	if err != nil {
		t.Fatalf("renewal with the current certificate: %v", err)
	}
	renewed, _, _ := parseChain(t, resp2.CertChain)
	if renewed.URIs[0].String() != appID || !pki.KeyMatches(renewed.PublicKey, key2) {
		t.Errorf("renewed certificate: %v", renewed.URIs)
	}
	// The current certificate does not stretch to another identity.
	_, otherCSR := newCSR(t, pki.ECDSAP256, "spiffe://cluster.local/ns/default/sa/admin")
	if _, err := client(t, addr, c.Roots(), current).CreateCertificate(ctxT(t), &pb.IstioCertificateRequest{Csr: otherCSR}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("other identity with the current certificate: %v, want PermissionDenied", err)
	}

	// An expired certificate from the same CA, a certificate from another
	// CA, and one for another trust domain from this CA.
	issuer := caIssuer(t, c.cfg.SelfSignedDir)
	expiredLeaf, err := issuer.Issue(key.Public(), pki.LeafOptions{URIs: current.Leaf.URIs, NotBefore: time.Now().Add(-3 * time.Hour), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	foreignCA := newFileCA(t, nil, nil)
	foreignLeaf, err := caIssuer(t, foreignCA.cfg.SelfSignedDir).Issue(key.Public(), pki.LeafOptions{URIs: current.Leaf.URIs, NotBefore: time.Now(), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	evil := mustURL(t, "spiffe://evil.org/ns/default/sa/app")
	tdLeaf, err := issuer.Issue(key.Public(), pki.LeafOptions{URIs: evil, NotBefore: time.Now(), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		leaf *x509.Certificate
		msg  string
	}{
		"expired":              {expiredLeaf, "expired"},
		"untrusted":            {foreignLeaf, "unknown authority"},
		"foreign trust domain": {tdLeaf, `not in trust domain "cluster.local"`},
	} {
		t.Run(name, func(t *testing.T) {
			cert := &tls.Certificate{Certificate: [][]byte{tt.leaf.Raw}, PrivateKey: key, Leaf: tt.leaf}
			_, csr := newCSR(t, pki.ECDSAP256, appID)
			_, err := client(t, addr, c.Roots(), cert).CreateCertificate(ctxT(t), &pb.IstioCertificateRequest{Csr: csr})
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error = %v, want Unauthenticated containing %q", err, tt.msg)
			}
		})
	}
}

// caIssuer builds an issuer from a file-mode CA's files, to mint
// certificates the CA itself would not (expired, other trust domain).
func caIssuer(t testing.TB, dir string) *pki.Issuer {
	t.Helper()
	m, found, err := readDir(dir)
	if err != nil || !found {
		t.Fatalf("read %s: %v %v", dir, found, err)
	}
	st, err := parseMaterial(m, dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st.issuer
}

// TestPersistence checks that a file-mode CA keeps its root across restarts
// and publishes it as a file.
func TestPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	rootFile := filepath.Join(t.TempDir(), "pub", "root-cert.pem")
	first, err := New(ctxT(t), Config{SelfSignedDir: dir, RootCertPath: rootFile}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	root := first.Issuer()
	if !root.IsCA || root.NotAfter.Sub(root.NotBefore) < 10*365*24*time.Hour || root.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("root: CA %v, lifetime %v, key %v; want a 10-year ECDSA CA", root.IsCA, root.NotAfter.Sub(root.NotBefore), root.PublicKeyAlgorithm)
	}
	if fi, err := os.Stat(filepath.Join(dir, CAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi.Mode(), err)
	}
	second, err := New(ctxT(t), Config{SelfSignedDir: dir}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !second.Issuer().Equal(root) {
		t.Error("restart generated a new root")
	}
	runCA(t, first)
	polltest.Until(t, "root file", func() bool {
		b, err := os.ReadFile(rootFile)
		return err == nil && bytes.Equal(b, first.RootCertPEM())
	})
}

func TestServingCertificate(t *testing.T) {
	c := newFileCA(t, nil, func(cfg *Config) { cfg.ServingDNSNames = []string{"istiod.istio-system.svc", "istiod.example"} })
	cert, err := c.ServingCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Roots().Verify([]*x509.Certificate{cert.Leaf}, time.Now(), x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.VerifyHostname("istiod.example"); err != nil {
		t.Error(err)
	}
	again, _ := c.ServingCertificate(nil)
	if again != cert {
		t.Error("serving certificate reissued before half its life")
	}
	// Half-life passed: a new one.
	c.cfg.Now = func() time.Time { return time.Now().Add(13 * time.Hour) }
	later, err := c.ServingCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if later == cert {
		t.Error("serving certificate not renewed after half its life")
	}
}
