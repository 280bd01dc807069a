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
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// Resource names, as Istio's agent serves them.
const (
	WorkloadCert = "default"
	RootCert     = "ROOTCA"
	// SecretType is the SDS type URL.
	SecretType = xdswire.SecretType
)

// The methods of Envoy's SecretDiscoveryService the server answers
// (DeltaSecrets is answered Unimplemented, as before).
const (
	streamMethod = "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets"
	fetchMethod  = "/envoy.service.secret.v3.SecretDiscoveryService/FetchSecrets"
)

// Source is where secrets come from.
type Source interface {
	Current() *certs.Cert
	Subscribe() (<-chan struct{}, func())
}

// Server is the SDS server.
type Server struct {
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
	g := grpcwire.NewServer(s.log)
	g.Handle(streamMethod, s.streamSecrets)
	g.Handle(fetchMethod, s.fetchSecrets)
	s.log.Info("serving SDS", "socket", ln.Addr().String())
	return g.Serve(ctx, ln)
}

// secret is the named secret, encoded (envoy Secret); digest fingerprints
// a file secret's contents.
func secret(name string, c *certs.Cert) (sec []byte, digest []byte, err error) {
	switch name {
	case WorkloadCert, RootCert:
		if c == nil {
			return nil, nil, errNoCert
		}
		if name == WorkloadCert {
			return xdswire.TLSCertificateSecret(name, c.ChainPEM, c.KeyPEM), nil, nil
		}
		return xdswire.ValidationContextSecret(name, c.RootPEM), nil, nil
	}
	f, ok, err := parseFileSecret(name)
	if !ok {
		return nil, nil, fmt.Errorf("unknown secret %q (want %s, %s, %s... or %s...)", name, WorkloadCert, RootCert, FileCertPrefix, FileRootPrefix)
	}
	if err != nil {
		return nil, nil, err
	}
	return f.load(name)
}

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
func (s *Server) response(names []string, c *certs.Cert) (*xdswire.DiscoveryResponse, []error) {
	resp := &xdswire.DiscoveryResponse{TypeURL: SecretType, Nonce: strconv.FormatUint(s.nonce.Add(1), 10)}
	h := sha256.New()
	if c != nil {
		h.Write([]byte(c.Leaf.SerialNumber.Text(16)))
	}
	var errs []error
	for _, n := range names {
		sec, digest, err := secret(n, c)
		if err != nil {
			if !errors.Is(err, errNoCert) {
				errs = append(errs, err)
			}
			continue
		}
		h.Write(digest)
		resp.Resources = append(resp.Resources, xdswire.Any{TypeURL: SecretType, Value: sec})
	}
	if len(resp.Resources) == 0 {
		return nil, errs
	}
	resp.VersionInfo = hex.EncodeToString(h.Sum(nil)[:8])
	return resp, errs
}

// streamSecrets serves one proxy's SDS stream: the requested secrets as soon
// as a certificate exists, and again after every rotation. ACKs are not
// answered; a NACK is logged and not answered with the same secrets.
func (s *Server) streamSecrets(stream grpcwire.ServerStream) error {
	reqs := make(chan *xdswire.DiscoveryRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			b, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			req, err := xdswire.DecodeDiscoveryRequest(b)
			if err != nil {
				errc <- grpcwire.Errorf(grpcwire.InvalidArgument, "SDS request: %v", err)
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
		return grpcwire.Errorf(grpcwire.Internal, "%v", err)
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
		return stream.Send(resp.Marshal())
	}
	for {
		select {
		case err := <-errc:
			if errors.Is(err, io.EOF) || grpcwire.CodeOf(err) == grpcwire.Canceled {
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
			if req.TypeURL != "" && req.TypeURL != SecretType {
				return grpcwire.Errorf(grpcwire.InvalidArgument, "type %q is not %s", req.TypeURL, SecretType)
			}
			if req.ErrorDetail != nil {
				s.log.Warn("proxy rejected secrets", "version", req.VersionInfo, "err", req.ErrorDetail.Message)
				continue
			}
			if req.ResponseNonce != "" && req.ResponseNonce != sentNonce {
				continue // stale
			}
			requested := slices.Sorted(slices.Values(req.ResourceNames))
			if req.ResponseNonce == sentNonce && sentNonce != "" && slices.Equal(requested, names) {
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

// fetchSecrets answers a one-shot request (FetchSecrets).
func (s *Server) fetchSecrets(stream grpcwire.ServerStream) error {
	b, err := stream.Recv()
	if err != nil {
		return err
	}
	req, err := xdswire.DecodeDiscoveryRequest(b)
	if err != nil {
		return grpcwire.Errorf(grpcwire.InvalidArgument, "SDS request: %v", err)
	}
	resp, err := s.Fetch(req.ResourceNames)
	if err != nil {
		return err
	}
	return stream.Send(resp.Marshal())
}

// Fetch is the answer to a one-shot request for names (FetchSecrets): every
// one of them, or an InvalidArgument or Unavailable status.
func (s *Server) Fetch(names []string) (*xdswire.DiscoveryResponse, error) {
	resp, errs := s.response(names, s.src.Current())
	if len(errs) > 0 {
		return nil, grpcwire.Errorf(grpcwire.InvalidArgument, "%v", errors.Join(errs...))
	}
	if resp == nil || len(resp.Resources) < len(names) {
		return nil, grpcwire.Errorf(grpcwire.Unavailable, "no workload certificate yet")
	}
	return resp, nil
}
