// Package sds serves the workload certificate to the proxy over Envoy's
// Secret Discovery Service on a Unix socket: "default" (key and chain) and
// "ROOTCA" (trusted roots), pushed again on every rotation.
package sds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/agent/certs"
)

// Resource names, as Istio's agent serves them.
const (
	WorkloadCert = "default"
	RootCert     = "ROOTCA"
	// SecretType is the SDS type URL.
	SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// Source is where secrets come from.
type Source interface {
	Current() *certs.Cert
	Subscribe() (<-chan struct{}, func())
}

// Server is the SDS server.
type Server struct {
	secretv3.UnimplementedSecretDiscoveryServiceServer
	src   Source
	log   *slog.Logger
	nonce atomic.Uint64
}

// New returns a server for src.
func New(src Source, log *slog.Logger) *Server {
	return &Server{src: src, log: log.With("component", "sds")}
}

// Serve listens on the Unix socket at path (mode 0600: only the proxy, which
// runs as the same user, may read keys) until ctx ends.
func (s *Server) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sds socket dir: %w", err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("sds listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("sds socket mode: %w", err)
	}
	g := grpc.NewServer()
	secretv3.RegisterSecretDiscoveryServiceServer(g, s)
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	s.log.Info("serving SDS", "socket", path)
	if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// secret renders one named secret from the current certificate.
func secret(name string, c *certs.Cert) (*anypb.Any, error) {
	var sec *tlsv3.Secret
	switch name {
	case WorkloadCert:
		sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.ChainPEM}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.KeyPEM}},
		}}}
	case RootCert:
		sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.RootPEM}},
		}}}
	default:
		return nil, fmt.Errorf("unknown secret %q (want %s or %s)", name, WorkloadCert, RootCert)
	}
	return anypb.New(sec)
}

func (s *Server) response(names []string, c *certs.Cert) (*discovery.DiscoveryResponse, error) {
	resp := &discovery.DiscoveryResponse{TypeUrl: SecretType, VersionInfo: c.Leaf.SerialNumber.Text(16),
		Nonce: strconv.FormatUint(s.nonce.Add(1), 10)}
	for _, n := range names {
		a, err := secret(n, c)
		if err != nil {
			return nil, err
		}
		resp.Resources = append(resp.Resources, a)
	}
	return resp, nil
}

// StreamSecrets serves one proxy's SDS stream: the requested secrets as soon
// as a certificate exists, and again after every rotation. ACKs are not
// answered; a NACK is logged and not answered with the same secrets.
func (s *Server) StreamSecrets(stream secretv3.SecretDiscoveryService_StreamSecretsServer) error {
	reqs := make(chan *discovery.DiscoveryRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- req:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	changed, cancel := s.src.Subscribe()
	defer cancel()
	var names []string
	var sentNonce, sentVersion string
	send := func() error {
		c := s.src.Current()
		if c == nil || len(names) == 0 {
			return nil // sent once the first certificate arrives
		}
		resp, err := s.response(names, c)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		sentNonce, sentVersion = resp.Nonce, resp.VersionInfo
		return stream.Send(resp)
	}
	for {
		select {
		case err := <-errc:
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case <-changed:
			if c := s.src.Current(); c != nil && c.Leaf.SerialNumber.Text(16) != sentVersion {
				if err := send(); err != nil {
					return err
				}
			}
		case req := <-reqs:
			if req.GetTypeUrl() != "" && req.GetTypeUrl() != SecretType {
				return status.Errorf(codes.InvalidArgument, "type %q is not %s", req.GetTypeUrl(), SecretType)
			}
			if req.GetErrorDetail() != nil {
				s.log.Warn("proxy rejected secrets", "version", req.GetVersionInfo(), "err", req.GetErrorDetail().GetMessage())
				continue
			}
			if req.GetResponseNonce() != "" && req.GetResponseNonce() != sentNonce {
				continue // stale
			}
			requested := slices.Sorted(slices.Values(req.GetResourceNames()))
			if req.GetResponseNonce() == sentNonce && sentNonce != "" && slices.Equal(requested, names) {
				continue // an ACK
			}
			names = requested
			if err := send(); err != nil {
				return err
			}
		}
	}
}

// FetchSecrets answers a one-shot request.
func (s *Server) FetchSecrets(_ context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	c := s.src.Current()
	if c == nil {
		return nil, status.Error(codes.Unavailable, "no workload certificate yet")
	}
	resp, err := s.response(req.GetResourceNames(), c)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return resp, nil
}
