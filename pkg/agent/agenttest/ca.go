// Package agenttest is a small certificate authority for the agent's tests:
// Istio's CA API (istio.v1.auth.IstioCertificateService) on loopback gRPC,
// signing CSRs for one workload identity that a bearer token proves. It
// stands for istiod on the agent's side of the wire and shares no code
// with istiod's CA, whose own tests cover the other side.
package agenttest

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	securityapi "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Token is the bearer token the test CA accepts.
const Token = "agent-test-token"

// defaultTTL is the lifetime of a certificate whose request names none.
const defaultTTL = 24 * time.Hour

// CA is a test CA: a self-signed root that signs leaf certificates itself.
type CA struct {
	// Addr is its plaintext gRPC address, set by StartCA.
	Addr string
	// Identity is what Token proves, and the only SAN the CA signs.
	Identity spiffe.ID

	issuer  *pki.Issuer
	rootPEM []byte
}

var _ securityapi.IstioCertificateServiceServer = (*service)(nil)

// NewCA makes a CA with a fresh ECDSA root that signs for
// spiffe://cluster.local/ns/<namespace>/sa/<sa> when called with Token;
// Register serves it on a gRPC server.
func NewCA(t testing.TB, namespace, sa string) *CA {
	t.Helper()
	id, err := spiffe.New(spiffe.DefaultTrustDomain, namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	root, err := pki.NewRoot(key, pkix.Name{Organization: []string{"agenttest"}}, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.NewBundle(root)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := pki.NewIssuer(root, key, nil, roots, now)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Identity: id, issuer: issuer, rootPEM: pki.EncodeCertificates(root)}
}

// RootCertPEM is the CA's root certificate, the last of every chain it returns.
func (c *CA) RootCertPEM() []byte { return c.rootPEM }

// Register serves the CA's API on s.
func (c *CA) Register(s *grpc.Server) {
	securityapi.RegisterIstioCertificateServiceServer(s, &service{ca: c})
}

// StartCA runs NewCA's CA on its own gRPC server on loopback until the test ends.
func StartCA(t testing.TB, namespace, sa string) *CA {
	t.Helper()
	c := NewCA(t, namespace, sa)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	c.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c.Addr = ln.Addr().String()
	return c
}

type service struct {
	securityapi.UnimplementedIstioCertificateServiceServer
	ca *CA
}

// CreateCertificate checks the token and that the CSR asks for the CA's
// identity, then returns the leaf and the root, in PEM.
func (s *service) CreateCertificate(ctx context.Context, req *securityapi.IstioCertificateRequest) (*securityapi.IstioCertificateResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if !slices.Contains(md.Get("authorization"), "Bearer "+Token) {
		return nil, status.Error(codes.Unauthenticated, "no bearer token the test CA knows")
	}
	csr, err := pki.ParseCSR([]byte(req.GetCsr()))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	want := s.ca.Identity.String()
	if len(csr.URIs) != 1 || csr.URIs[0].String() != want || len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) > 0 {
		return nil, status.Errorf(codes.PermissionDenied, "CSR asks for %s, want only URI:%s", strings.Join(pki.SANs(csr), ", "), want)
	}
	ttl := time.Duration(req.GetValidityDuration()) * time.Second
	if ttl <= 0 {
		ttl = defaultTTL
	}
	leaf, err := s.ca.issuer.Issue(csr.PublicKey, pki.LeafOptions{URIs: []*url.URL{s.ca.Identity.URL()}, NotBefore: time.Now(), TTL: ttl})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &securityapi.IstioCertificateResponse{CertChain: []string{pemOf(leaf), string(s.ca.rootPEM)}}, nil
}

func pemOf(c *x509.Certificate) string { return string(pki.EncodeCertificates(c)) }
