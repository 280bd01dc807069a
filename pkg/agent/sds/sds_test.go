package sds_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skiff-mesh/skiff/pkg/agent/agenttest"
	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/agent/sds"
	"github.com/skiff-mesh/skiff/pkg/grpcsock/grpcsocktest"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

func TestSDSServesAndRotates(t *testing.T) {
	ca := agenttest.StartCA(t, "default", "reviews")
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte(agenttest.Token), 0o600)
	client, err := certs.DialCA(certs.CAOptions{Addr: ca.Addr, Plaintext: true, TokenPath: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// A 10 s certificate rotates at about 5 s.
	m := certs.NewManager(certs.Options{Identity: ca.Identity, KeyType: pki.RSA2048, TTL: 10 * time.Second}, client, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = m.Run(ctx) }()

	sock := filepath.Join(t.TempDir(), "socket")
	srv := sds.New(m, slog.New(slog.DiscardHandler))
	ln := grpcsocktest.Listen(t, sock)
	go func() { _ = srv.Serve(ctx, ln) }()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", st, err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := secretv3.NewSecretDiscoveryServiceClient(conn).StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discovery.DiscoveryRequest{TypeUrl: sds.SecretType, ResourceNames: []string{sds.WorkloadCert, sds.RootCert}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	recv := func() (*tls.Certificate, []byte, *discovery.DiscoveryResponse) {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var cert *tls.Certificate
		var root []byte
		for _, a := range resp.Resources {
			var s tlsv3.Secret
			if err := a.UnmarshalTo(&s); err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateAll(); err != nil {
				t.Errorf("secret %s: %v", s.Name, err)
			}
			switch s.Name {
			case sds.WorkloadCert:
				tc := s.GetTlsCertificate()
				c, err := tls.X509KeyPair(tc.GetCertificateChain().GetInlineBytes(), tc.GetPrivateKey().GetInlineBytes())
				if err != nil {
					t.Fatalf("default: %v", err)
				}
				cert = &c
			case sds.RootCert:
				root = s.GetValidationContext().GetTrustedCa().GetInlineBytes()
			}
		}
		if cert == nil || len(root) == 0 {
			t.Fatalf("response lacks default or ROOTCA: %v", resp)
		}
		return cert, root, resp
	}
	first, root, resp := recv()
	// ACK: nothing is resent.
	ack := &discovery.DiscoveryRequest{TypeUrl: sds.SecretType, ResourceNames: req.ResourceNames, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	if err := stream.Send(ack); err != nil {
		t.Fatal(err)
	}
	second, root2, _ := recv() // the rotation, pushed unasked
	if first.Leaf.SerialNumber.Cmp(second.Leaf.SerialNumber) == 0 {
		t.Error("rotation pushed the same certificate")
	}
	if time.Now().After(first.Leaf.NotAfter) {
		t.Error("rotation pushed after the first certificate expired")
	}
	if string(root) != string(root2) || string(root) != string(ca.RootCertPEM()) {
		t.Error("ROOTCA is not the CA's root")
	}
}
