// Package sds serves the workload certificate to the proxy over Envoy's
// Secret Discovery Service on a Unix socket: "default" (key and chain) and
// "ROOTCA" (trusted roots), pushed again on every rotation, and, as Istio's
// agent does, secrets read from mounted files ("file-cert:CERT~KEY",
// "file-root:CA", "file-root:system"), pushed again when the files change.
package sds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
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
	"github.com/skiff-mesh/skiff/pkg/grpcsock"
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

// Serve serves SDS on ln until ctx ends. The agent listens with mode 0600
// (grpcsock.Listen): only the proxy, which runs as the same user, may read
// keys.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	g := grpc.NewServer()
	secretv3.RegisterSecretDiscoveryServiceServer(g, s)
	s.log.Info("serving SDS", "socket", ln.Addr().String())
	return grpcsock.Serve(ctx, g, ln)
}

// secret renders one named secret: from the current certificate (c may be
// nil until the first arrives) or from mounted files. digest fingerprints
// file contents, for the response's version.
func secret(name string, c *certs.Cert) (a *anypb.Any, digest []byte, err error) {
	var sec *tlsv3.Secret
	switch name {
	case WorkloadCert, RootCert:
		if c == nil {
			return nil, nil, errNoCert
		}
		if name == WorkloadCert {
			sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.ChainPEM}},
				PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.KeyPEM}},
			}}}
		} else {
			sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.RootPEM}},
			}}}
		}
	default:
		f, ok, err := parseFileSecret(name)
		if !ok {
			return nil, nil, fmt.Errorf("unknown secret %q (want %s, %s, %s... or %s...)", name, WorkloadCert, RootCert, FileCertPrefix, FileRootPrefix)
		}
		if err != nil {
			return nil, nil, err
		}
		if sec, digest, err = f.load(name); err != nil {
			return nil, nil, err
		}
	}
	a, err = anypb.New(sec)
	return a, digest, err
}

// errNoCert: the workload certificate is not there yet.
var errNoCert = errors.New("no workload certificate yet")

// filePaths lists the files of the file secrets among names.
func filePaths(names []string) []string {
	var out []string
	for _, n := range names {
		if f, ok, err := parseFileSecret(n); ok && err == nil {
			out = append(out, f.paths()...)
		}
	}
	return out
}

// response renders the secrets of names that can be served now; the others
// are left out (the proxy keeps waiting for them) and returned as errors.
// nil when none can. The version changes with the certificate and with
// the contents of the files.
func (s *Server) response(names []string, c *certs.Cert) (*discovery.DiscoveryResponse, []error) {
	resp := &discovery.DiscoveryResponse{TypeUrl: SecretType, Nonce: strconv.FormatUint(s.nonce.Add(1), 10)}
	h := sha256.New()
	if c != nil {
		h.Write([]byte(c.Leaf.SerialNumber.Text(16)))
	}
	var errs []error
	for _, n := range names {
		a, digest, err := secret(n, c)
		if err != nil {
			if !errors.Is(err, errNoCert) {
				errs = append(errs, err)
			}
			continue
		}
		h.Write(digest)
		resp.Resources = append(resp.Resources, a)
	}
	if len(resp.Resources) == 0 {
		return nil, errs
	}
	resp.VersionInfo = hex.EncodeToString(h.Sum(nil)[:8])
	return resp, errs
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
	files, err := newFileWatch()
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer files.close()
	var names []string
	var sentNonce, sentVersion string
	send := func() error {
		if len(names) == 0 {
			return nil
		}
		if err := files.watch(filePaths(names)); err != nil {
			s.log.Warn("secret files not watched; changes are seen at the next request", "err", err)
		}
		resp, errs := s.response(names, s.src.Current())
		for _, err := range errs {
			s.log.Warn("secret not served", "err", err)
		}
		if resp == nil || resp.VersionInfo == sentVersion {
			return nil // sent once there is something new
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
			if err := send(); err != nil {
				return err
			}
		case _, ok := <-files.w.Events:
			if !ok {
				return nil
			}
			if err := send(); err != nil {
				return err
			}
		case err := <-files.w.Errors:
			s.log.Warn("secret files watch", "err", err)
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
			if !slices.Equal(requested, names) {
				sentVersion = "" // a new set of names is answered even if unchanged
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
	resp, errs := s.response(req.GetResourceNames(), s.src.Current())
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	if resp == nil || len(resp.Resources) < len(req.GetResourceNames()) {
		return nil, status.Error(codes.Unavailable, "no workload certificate yet")
	}
	return resp, nil
}
