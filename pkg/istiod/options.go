package istiod

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Option adds a component to istiod.
type Option func(*options)

type options struct {
	registerGRPC []func(*grpc.Server)
	secureAddr   string
	secureCreds  credentials.TransportCredentials
	secureOpts   []grpc.ServerOption
	registry     *prometheus.Registry
}

// WithGRPC calls register on every gRPC server istiod runs (plaintext
// 15010 and, with WithSecureGRPC, TLS 15012) before it serves: the way the
// CA adds its CreateCertificate service.
func WithGRPC(register func(*grpc.Server)) Option {
	return func(o *options) { o.registerGRPC = append(o.registerGRPC, register) }
}

// WithSecureGRPC runs a second gRPC server on addr (":15012") with creds,
// serving the same services as the plaintext one; extra options (such as
// interceptors that authenticate callers) apply to it alone.
func WithSecureGRPC(addr string, creds credentials.TransportCredentials, extra ...grpc.ServerOption) Option {
	return func(o *options) { o.secureAddr, o.secureCreds, o.secureOpts = addr, creds, extra }
}

// WithMetricsRegistry makes istiod register its collectors in reg (so other
// components can share it) instead of a private registry.
func WithMetricsRegistry(reg *prometheus.Registry) Option {
	return func(o *options) { o.registry = reg }
}
