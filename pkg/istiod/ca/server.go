package ca

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// service implements istio.v1.auth.IstioCertificateService.
type service struct {
	pb.UnimplementedIstioCertificateServiceServer
	ca *CA
}

// Register serves istio.v1.auth.IstioCertificateService from the CA on s.
// Callers are authenticated with the configured Authenticators.
func (c *CA) Register(s grpc.ServiceRegistrar) {
	pb.RegisterIstioCertificateServiceServer(s, &service{ca: c})
}

// CreateCertificate authenticates the caller, then signs its CSR for the
// identity it proved. Errors: Unauthenticated (no authenticator accepted
// the call), InvalidArgument (bad PEM, CSR, key type or validity), and
// PermissionDenied (the CSR names a SAN the caller did not prove).
func (s *service) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	resp, err := s.createCertificate(ctx, req)
	if err != nil {
		s.ca.refused.Add(1)
	} else {
		s.ca.issued.Add(1)
	}
	return resp, err
}

func (s *service) createCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	growStack(len(req.GetCsr()))
	c := s.ca
	id, by, err := Authenticate(ctx, c.auths)
	if err != nil {
		c.log.Info("certificate request refused", "err", err)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	vd := req.GetValidityDuration()
	if vd < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "validity_duration %d is negative", vd)
	}
	ttl := c.cfg.MaxTTL
	if maxSec := int64(c.cfg.MaxTTL / time.Second); vd < maxSec && vd < math.MaxInt64/int64(time.Second) {
		ttl = time.Duration(vd) * time.Second
	}
	issued, err := c.Sign([]byte(req.GetCsr()), id, ttl)
	if err != nil {
		var sanErr *SANError
		switch {
		case errors.As(err, &sanErr):
			c.log.Info("certificate request denied", "identity", id.String(), "auth", by, "san", sanErr.SAN)
			return nil, status.Error(codes.PermissionDenied, err.Error())
		case errors.Is(err, pki.ErrInvalid):
			c.log.Info("invalid certificate request", "identity", id.String(), "auth", by, "err", err)
			return nil, status.Error(codes.InvalidArgument, err.Error())
		default:
			c.log.Error("signing failed", "identity", id.String(), "err", err)
			return nil, status.Error(codes.Internal, "signing failed")
		}
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.Debug("signed certificate", "identity", id.String(), "auth", by, "expires", issued.NotAfter)
	}
	return &pb.IstioCertificateResponse{CertChain: issued.Chain}, nil
}

// signingStack is about the stack a certificate request needs: the CSR's
// ASN.1 parsing recurses and the signature code keeps large frames.
const signingStack = 16 << 10

// growStack grows the calling goroutine's stack to hold signingStack
// more bytes in one step, while the stack is still shallow. gRPC runs each
// call on a new goroutine with a small stack, which would otherwise double
// two or three times in the middle of the CSR's parsing, each time copying
// every frame and adjusting its pointers: several percent of a request's
// CPU.
//
// The frame is used through an index the compiler cannot know (n), so
// that it is not optimized away.
//
//go:noinline
func growStack(n int) byte {
	var frame [signingStack]byte
	frame[uint(n)%uint(len(frame))] = byte(n)
	return frame[uint(n+1)%uint(len(frame))]
}
