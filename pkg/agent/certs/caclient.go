package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// CAClient asks istiod's CA (istio.v1.auth.IstioCertificateService) to sign
// CSRs, authenticating with the pod's service-account token.
type CAClient struct {
	conn      *grpcwire.Conn
	own       bool // the connection is the client's to close
	tokenPath string
	clusterID string
}

// NewCAClient is a CA client on conn, an open connection to the CA that
// the caller keeps and closes (the agent's to istiod, when the CA is
// istiod). Each CSR carries the token at tokenPath, unless it is "" (the
// connection's own per-RPC credentials send it), and clusterID.
func NewCAClient(conn *grpcwire.Conn, tokenPath, clusterID string) *CAClient {
	return &CAClient{conn: conn, tokenPath: tokenPath, clusterID: clusterID}
}

var _ Signer = (*CAClient)(nil)

// createCertificate is the CA's one method.
const createCertificate = "/istio.v1.auth.IstioCertificateService/CreateCertificate"

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
	var opts grpcwire.DialOptions
	if !o.Plaintext {
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
		opts.TLS = &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	}
	conn, err := grpcwire.Dial(o.Addr, opts)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", o.Addr, err)
	}
	return &CAClient{conn: conn, own: true, tokenPath: o.TokenPath, clusterID: o.ClusterID}, nil
}

// Close closes the connection DialCA opened; NewCAClient's is the caller's.
func (c *CAClient) Close() error {
	if !c.own {
		return nil
	}
	return c.conn.Close()
}

// Sign sends the CSR with the current token (re-read each time: it rotates).
func (c *CAClient) Sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]*x509.Certificate, error) {
	var md []string
	if c.tokenPath != "" {
		tok, err := os.ReadFile(c.tokenPath)
		if err != nil {
			return nil, fmt.Errorf("service-account token: %w", err)
		}
		md = append(md, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	if c.clusterID != "" {
		md = append(md, "clusterid", c.clusterID)
	}
	req := &xdswire.CertificateRequest{CSR: string(csrPEM), ValidityDuration: int64(ttl / time.Second)}
	b, err := c.conn.Invoke(ctx, createCertificate, req.Marshal(), md...)
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate: %w", err)
	}
	pems, err := xdswire.DecodeCertificateResponse(b)
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate response: %w", err)
	}
	var chain []*x509.Certificate
	for i, p := range pems {
		certs, err := pki.ParseCertificates([]byte(p))
		if err != nil {
			return nil, fmt.Errorf("CreateCertificate response, cert_chain[%d]: %w", i, err)
		}
		chain = append(chain, certs...)
	}
	return chain, nil
}
