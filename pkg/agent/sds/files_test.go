package sds_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/agent/sds"
	"github.com/skiff-mesh/skiff/pkg/grpcsock/grpcsocktest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// noCert is a source whose workload certificate never arrives: file
// secrets must not wait for it.
type noCert struct{}

func (noCert) Current() *certs.Cert                 { return nil }
func (noCert) Subscribe() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

// selfSigned writes a certificate and key named cn into dir (replaced by
// rename, as a mounted Secret changes) and returns their paths and the
// certificate's PEM.
func selfSigned(t *testing.T, dir, cn string) (certPath, keyPath string, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, b := range map[string][]byte{certPath: certPEM, keyPath: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath, certPEM
}

// TestFileSecrets: file-cert and file-root secrets are served from the
// files without a workload certificate, pushed again when the files
// change, and a secret whose file is missing is left out, not fatal.
func TestFileSecrets(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, first := selfSigned(t, dir, "one")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := filepath.Join(t.TempDir(), "socket")
	ln := grpcsocktest.Listen(t, sock)
	go func() { _ = sds.New(noCert{}, slog.New(slog.DiscardHandler)).Serve(ctx, ln) }()
	polltest.Until(t, "the SDS socket", func() bool { _, err := os.Stat(sock); return err == nil })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := secretv3.NewSecretDiscoveryServiceClient(conn)
	stream, err := client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pair, root, missing := sds.FileCertPrefix+certPath+"~"+keyPath, sds.FileRootPrefix+certPath, sds.FileRootPrefix+filepath.Join(dir, "absent.pem")
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: sds.SecretType, ResourceNames: []string{pair, root, missing, sds.WorkloadCert}}); err != nil {
		t.Fatal(err)
	}
	recv := func() (map[string]*tlsv3.Secret, *discovery.DiscoveryResponse) {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*tlsv3.Secret{}
		for _, a := range resp.Resources {
			var s tlsv3.Secret
			if err := a.UnmarshalTo(&s); err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateAll(); err != nil {
				t.Errorf("secret %s: %v", s.Name, err)
			}
			got[s.Name] = &s
		}
		return got, resp
	}
	got, resp := recv()
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	if slices.Sort(names); !slices.Equal(names, []string{pair, root}) {
		t.Fatalf("served %v, want the two file secrets (the missing file and the certificate not yet there left out)", names)
	}
	if string(got[pair].GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != string(first) ||
		string(got[root].GetValidationContext().GetTrustedCa().GetInlineBytes()) != string(first) {
		t.Fatal("file secrets do not hold the files' contents")
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: sds.SecretType, ResourceNames: []string{pair, root, missing, sds.WorkloadCert},
		VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
		t.Fatal(err)
	}
	_, _, second := selfSigned(t, dir, "two")
	// Pushed unasked, once per file change: the certificate and the key
	// are two renames, so the new pair may come in the second push.
	for i := 0; ; i++ {
		got, resp = recv()
		if string(got[pair].GetTlsCertificate().GetCertificateChain().GetInlineBytes()) == string(second) {
			break
		}
		if i == 3 {
			t.Fatal("a changed certificate file was not pushed")
		}
		if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: sds.SecretType, ResourceNames: []string{pair, root, missing, sds.WorkloadCert},
			VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
			t.Fatal(err)
		}
	}

	_, err = client.FetchSecrets(ctx, &discovery.DiscoveryRequest{ResourceNames: []string{"file-cert:only-a-cert"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a malformed file-cert name: %v, want InvalidArgument", err)
	}
	if r, err := client.FetchSecrets(ctx, &discovery.DiscoveryRequest{ResourceNames: []string{root}}); err != nil || len(r.Resources) != 1 {
		t.Fatalf("fetch file-root: %v %v", r, err)
	}
}
