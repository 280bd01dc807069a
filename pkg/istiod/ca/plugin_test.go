package ca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// pluggedCA is a root and an intermediate made with the openssl binary, as
// an operator would with Istio's certificate tools.
type pluggedCA struct {
	root, inter            *x509.Certificate
	rootPEM, interPEM, key []byte
}

func openssl(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newPluggedCA(t testing.TB, name string) *pluggedCA {
	t.Helper()
	dir := t.TempDir()
	const ext = "[v3_ca]\nbasicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n" +
		"subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n"
	if err := os.WriteFile(filepath.Join(dir, "ext.cnf"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	openssl(t, dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", "root-key.pem", "-out", "root-cert.pem", "-days", "3650", "-subj", "/O=Skiff Test/CN=Root "+name,
		"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
	openssl(t, dir, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.csr",
		"-subj", "/O=Skiff Test/CN=Intermediate "+name)
	openssl(t, dir, "x509", "-req", "-in", "ca.csr", "-CA", "root-cert.pem", "-CAkey", "root-key.pem",
		"-set_serial", fmt.Sprintf("0x%x", time.Now().UnixNano()), "-days", "365", "-sha256",
		"-extfile", "ext.cnf", "-extensions", "v3_ca", "-out", "ca-cert.pem")
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p := &pluggedCA{rootPEM: read("root-cert.pem"), interPEM: read("ca-cert.pem"), key: read("ca-key.pem")}
	var err error
	if p.root, err = pki.ParseCertificate(p.rootPEM); err != nil {
		t.Fatal(err)
	}
	if p.inter, err = pki.ParseCertificate(p.interPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// files returns the cacerts files for this CA signing, with roots trusted.
func (p *pluggedCA) files(roots ...*pluggedCA) map[string][]byte {
	var bundle []byte
	for _, r := range roots {
		bundle = append(bundle, r.rootPEM...)
	}
	return map[string][]byte{
		CACertFile:    p.interPEM,
		CAKeyFile:     p.key,
		CertChainFile: append(append([]byte(nil), p.interPEM...), p.rootPEM...),
		RootCertFile:  bundle,
	}
}

func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAtomic updates dir the way the kubelet updates a Secret volume: the
// files are symlinks through "..data", a symlink swapped by rename to a new
// timestamped directory.
func writeAtomic(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	ts := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ts, files)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
}

func signVia(t testing.TB, cl pb.IstioCertificateServiceClient, tk *tokenKey) []string {
	t.Helper()
	_, csr := newCSR(t, pki.ECDSAP256, appID)
	resp, err := cl.CreateCertificate(withToken(ctxT(t), tk.token(t, "default", "app")), &pb.IstioCertificateRequest{Csr: csr})
	if err != nil {
		t.Fatal(err)
	}
	return resp.CertChain
}

// TestPluginCA signs with a plugged intermediate, then switches issuer when
// the files change (plain rewrites and kubelet-style symlink swaps), keeps
// the issuer when the new files are broken, and republishes the root.
func TestPluginCA(t *testing.T) {
	a, b := newPluggedCA(t, "A"), newPluggedCA(t, "B")
	dir := t.TempDir()
	writeAtomic(t, dir, a.files(a))
	rootFile := filepath.Join(t.TempDir(), "root-cert.pem")
	tk := newTokenKey(t)
	c := newFileCA(t, tk, func(cfg *Config) {
		cfg.PluginCertsDir = dir
		cfg.SelfSignedDir = ""
		cfg.RootCertPath = rootFile
	})
	if c.Mode() != ModePlugin {
		t.Fatalf("mode %s, want plugin", c.Mode())
	}
	runCA(t, c)
	cl := client(t, serve(t, c), c.Roots(), nil)

	check := func(p *pluggedCA) {
		t.Helper()
		chain := signVia(t, cl, tk)
		leaf, inter, roots := parseChain(t, chain)
		if len(inter) != 1 || !inter[0].Equal(p.inter) {
			t.Fatalf("chain intermediates %d, want the plugged intermediate %s", len(inter), p.inter.Subject)
		}
		if !roots.Contains(p.root) {
			t.Fatalf("chain does not end at the plugged root %s", p.root.Subject)
		}
		only, _ := pki.NewBundle(p.root)
		if _, err := only.Verify(append([]*x509.Certificate{leaf}, inter...), time.Now()); err != nil {
			t.Fatalf("crypto/x509 against %s: %v", p.root.Subject, err)
		}
		opensslVerify(t, chain, only)
		sc, err := c.ServingCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sc.Leaf.RawIssuer, p.inter.RawSubject) || len(sc.Certificate) != 2 {
			t.Errorf("serving certificate issued by %s with %d certificates, want %s and 2", sc.Leaf.Issuer, len(sc.Certificate), p.inter.Subject)
		}
		polltest.Until(t, "root file for "+p.root.Subject.CommonName, func() bool {
			got, _ := os.ReadFile(rootFile)
			return bytes.Equal(got, p.rootPEM)
		})
	}
	check(a)

	// Kubelet-style swap to B.
	writeAtomic(t, dir, b.files(b))
	polltest.Until(t, "issuer B", func() bool { return c.Issuer().Equal(b.inter) })
	check(b)

	// Broken files: the issuer stays B.
	changed, rejected := c.Changed(), c.Stats().Rejected
	writeAtomic(t, dir, map[string][]byte{CACertFile: a.interPEM, CAKeyFile: b.key, CertChainFile: nil, RootCertFile: a.rootPEM})
	polltest.Until(t, "the watcher to reject the broken files", func() bool { return c.Stats().Rejected > rejected })
	if err := c.Reload(); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Reload of mismatched key: %v", err)
	}
	select {
	case <-changed:
		t.Fatal("issuer changed to broken material")
	default:
	}
	check(b)

	// Plain rewrite of the files (no symlinks) in a fresh directory is
	// covered by Reload; back to A.
	writeAtomic(t, dir, a.files(a))
	polltest.Until(t, "issuer A", func() bool { return c.Issuer().Equal(a.inter) })
	check(a)
}

// TestRootRotation follows docs/ca.md: a new root is added to the bundle
// while the old one still signs, then the new one signs with both trusted,
// then the old root is dropped. Certificates from the old root renew over
// mTLS while it is still trusted, and not after.
func TestRootRotation(t *testing.T) {
	oldCA, newCA := newPluggedCA(t, "old"), newPluggedCA(t, "new")
	dir := t.TempDir()
	writeFiles(t, dir, oldCA.files(oldCA))
	tk := newTokenKey(t)
	c := newFileCA(t, tk, func(cfg *Config) { cfg.PluginCertsDir = dir; cfg.SelfSignedDir = "" })
	runCA(t, c)
	addr := serve(t, c)
	// Clients trust what the CA publishes at each step; the serving
	// certificate follows the issuer.
	issue := func() (*pki.Bundle, []string) {
		t.Helper()
		_, csr := newCSR(t, pki.ECDSAP256, appID)
		resp, err := client(t, addr, c.Roots(), nil).CreateCertificate(withToken(ctxT(t), tk.token(t, "default", "app")), &pb.IstioCertificateRequest{Csr: csr})
		if err != nil {
			t.Fatal(err)
		}
		_, _, roots := parseChain(t, resp.CertChain)
		return roots, resp.CertChain
	}

	// Step 0: a workload gets a certificate from the old root.
	wkKey, wkCSR := newCSR(t, pki.ECDSAP256, appID)
	resp, err := client(t, addr, c.Roots(), nil).CreateCertificate(withToken(ctxT(t), tk.token(t, "default", "app")), &pb.IstioCertificateRequest{Csr: wkCSR})
	if err != nil {
		t.Fatal(err)
	}
	oldCert := tlsCert(t, wkKey, resp.CertChain)

	renewWith := func(cert *tls.Certificate) error {
		t.Helper()
		_, csr := newCSR(t, pki.ECDSAP256, appID)
		_, err := client(t, addr, c.Roots(), cert).CreateCertificate(ctxT(t), &pb.IstioCertificateRequest{Csr: csr})
		return err
	}

	// Step 1: both roots trusted, old still signs. Responses carry both.
	writeFiles(t, dir, oldCA.files(oldCA, newCA))
	polltest.Until(t, "two roots", func() bool { return c.Roots().Len() == 2 })
	roots, _ := issue()
	if roots.Len() != 2 || !roots.Contains(newCA.root) {
		t.Fatalf("step 1 response bundle has %d roots", roots.Len())
	}

	// Step 2: the new root signs; the old one is still trusted.
	writeFiles(t, dir, newCA.files(newCA, oldCA))
	polltest.Until(t, "new issuer", func() bool { return c.Issuer().Equal(newCA.inter) })
	roots, chain := issue()
	if roots.Len() != 2 {
		t.Fatalf("step 2 response bundle has %d roots", roots.Len())
	}
	only, _ := pki.NewBundle(newCA.root)
	opensslVerify(t, chain, only)
	if err := renewWith(oldCert); err != nil {
		t.Fatalf("step 2: renewal with a certificate from the old root: %v", err)
	}

	// Step 3: the old root is dropped: its certificates no longer renew.
	writeFiles(t, dir, newCA.files(newCA))
	polltest.Until(t, "one root", func() bool { return c.Roots().Len() == 1 })
	if err := renewWith(oldCert); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("step 3: renewal with a certificate from the dropped root: %v", err)
	}
}
