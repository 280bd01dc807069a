package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	securityapi "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// CAClient asks istiod's CA (istio.v1.auth.IstioCertificateService) to sign
// CSRs, authenticating with the pod's service-account token.
type CAClient struct {
	conn      *grpc.ClientConn // nil when the connection is someone else's
	client    securityapi.IstioCertificateServiceClient
	tokenPath string
	clusterID string
}

// NewCAClient is a CA client on conn, an open connection to the CA that
// the caller keeps and closes (the agent's to istiod, when the CA is
// istiod). Each CSR carries the token at tokenPath, unless it is "" (the
// connection's own per-RPC credentials send it), and clusterID.
func NewCAClient(conn *grpc.ClientConn, tokenPath, clusterID string) *CAClient {
	return &CAClient{client: securityapi.NewIstioCertificateServiceClient(conn), tokenPath: tokenPath, clusterID: clusterID}
}

var _ Signer = (*CAClient)(nil)

// CAOptions say how to reach the CA.
type CAOptions struct {
	Addr string
	// Plaintext dials without TLS (controlPlaneAuthPolicy NONE, port 15010).
	Plaintext bool
	// RootCertPath verifies istiod's certificate ("": the system's roots);
	// ServerName is the name it must carry.
	RootCertPath string
	ServerName   string
	TokenPath    string
	ClusterID    string
}

// ReadRoots reads a PEM file of trusted roots.
func ReadRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// DialCA connects lazily (the first RPC dials).
func DialCA(o CAOptions) (*CAClient, error) {
	creds := insecure.NewCredentials()
	opts := []grpc.DialOption{grpc.WithDisableServiceConfig()}
	if !o.Plaintext {
		// tls.Conn holds each record it decrypts: gRPC's read buffer on
		// top of it would only be 32 KiB more for the connection's life.
		opts = append(opts, grpc.WithReadBufferSize(0))
		var pool *x509.CertPool // nil: the system's roots
		if o.RootCertPath != "" {
			var err error
			if pool, err = ReadRoots(o.RootCertPath); err != nil {
				return nil, fmt.Errorf("CA root certificate: %w", err)
			}
		}
		name := o.ServerName
		if name == "" {
			name, _, _ = strings.Cut(o.Addr, ":")
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12})
	}
	// No service config from DNS: its TXT lookup of istiod's name can wait
	// out the resolver's timeouts before the first certificate (Istio asks
	// for none either).
	conn, err := grpc.NewClient(o.Addr, append(opts, grpc.WithTransportCredentials(creds))...)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", o.Addr, err)
	}
	return &CAClient{conn: conn, client: securityapi.NewIstioCertificateServiceClient(conn), tokenPath: o.TokenPath, clusterID: o.ClusterID}, nil
}

// Close closes the connection DialCA opened; NewCAClient's is the caller's.
func (c *CAClient) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Sign sends the CSR with the current token (re-read each time: it rotates).
func (c *CAClient) Sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]*x509.Certificate, error) {
	if c.tokenPath != "" {
		tok, err := os.ReadFile(c.tokenPath)
		if err != nil {
			return nil, fmt.Errorf("service-account token: %w", err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	if c.clusterID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "ClusterID", c.clusterID)
	}
	resp, err := c.client.CreateCertificate(ctx, &securityapi.IstioCertificateRequest{Csr: string(csrPEM), ValidityDuration: int64(ttl / time.Second)})
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate: %w", err)
	}
	var chain []*x509.Certificate
	for i, p := range resp.GetCertChain() {
		certs, err := pki.ParseCertificates([]byte(p))
		if err != nil {
			return nil, fmt.Errorf("CreateCertificate response, cert_chain[%d]: %w", i, err)
		}
		chain = append(chain, certs...)
	}
	return chain, nil
}
