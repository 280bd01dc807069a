package istiod

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// identityKey carries the caller's proven identity in a stream's context.
type identityKey struct{}

// IdentityFrom returns the identity an xDS stream on the TLS port proved.
func IdentityFrom(ctx context.Context) (spiffe.ID, bool) {
	id, ok := ctx.Value(identityKey{}).(spiffe.ID)
	return id, ok
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s identityStream) Context() context.Context { return s.ctx }

// RequireIdentity makes xDS streams on the TLS port prove who they are, with
// a workload certificate or a service-account token, as the CA's callers do.
// CreateCertificate authenticates on its own (a workload without a
// certificate yet comes with its token). The identity is logged with the
// stream and kept in its context.
func RequireIdentity(authority *ca.CA, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.Contains(info.FullMethod, "DiscoveryService/") {
			return handler(srv, ss)
		}
		id, how, err := authenticateAside(ss.Context(), authority)
		if err != nil {
			addr := ""
			if p, ok := peer.FromContext(ss.Context()); ok {
				addr = p.Addr.String()
			}
			log.Warn("xDS stream refused", "peer", addr, "err", err)
			return status.Error(codes.Unauthenticated, err.Error())
		}
		log.Debug("xDS stream authenticated", "identity", id.String(), "by", how)
		return handler(srv, identityStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), identityKey{}, id)})
	}
}

// authenticateAside authenticates a stream on a goroutine of its own.
//
// Verifying a certificate chain (ECDSA) grows the stack of the goroutine
// it runs on to 16 KiB. A stream's handler goroutine lives as long as the
// stream, parked in RecvMsg, and the runtime halves a parked goroutine's
// stack at a collection only while it uses under a quarter of it: parked
// there, gRPC's frames and the handler's use about 3.5 KiB, plus the
// runtime's 800-byte guard, so a handler goroutine that verified its
// sidecar's certificate kept 16 KiB instead of 8 for the stream's life,
// 8 MiB at 1000 sidecars (docs/benchmarks.md, istiod xDS). Aside, the deep
// stack goes with its goroutine.
func authenticateAside(ctx context.Context, authority *ca.CA) (id spiffe.ID, how string, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		id, how, err = ca.Authenticate(ctx, authority.Authenticators())
	}()
	<-done
	return id, how, err
}
