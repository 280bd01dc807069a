package istiod

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
)

// Option adds a component to istiod.
type Option func(*options)

type options struct {
	registerGRPC []func(grpc.ServiceRegistrar)
	secureAddr   string
	secureTLS    *tls.Config
	secureIcpt   grpc.StreamServerInterceptor
	registry     *prometheus.Registry
	mesh         *mesh.Watcher
	releaseHeap  bool
}

// GCPercent is istiod's GC percent when the user sets no GOGC (Istio's
// istiod keeps Go's 100). A sidecar's connection state is made amid the
// garbage of its first configuration, and what outlives a push is made
// amid the push's garbage; collecting at 25 % heap growth instead of 100 %
// leaves fewer heap spans for those objects to be scattered over. At 1000
// sidecars: 116-118 MiB at rest instead of 124-128, 142-153 MiB at the
// peak of a push instead of 206-214, for about a fifth more CPU in the
// initial sync and 5-10 % more per full push; a third more per push at
// 250 sidecars, where the live heap is small (docs/benchmarks.md, istiod
// xDS, "the GC percent").
const GCPercent = 25

// WithHeapRelease makes istiod return its heap to the OS once a push has
// reached every sidecar (memory.Releaser: at most every 30 s), so the heap
// a push grew does not stay resident until the runtime's scavenger gets to
// it. cmd/istiod sets it unless GOGC=off (memory.Apply).
func WithHeapRelease() Option { return func(o *options) { o.releaseHeap = true } }

// WithMesh makes istiod use w (see WatchMesh) instead of following the
// mesh config itself: the command reads it first, for the CA.
func WithMesh(w *mesh.Watcher) Option { return func(o *options) { o.mesh = w } }

// WithGRPC calls register on every gRPC server istiod runs (plaintext
// 15010 and, with WithSecureGRPC, TLS 15012) before it serves: the way the
// CA adds its CreateCertificate service.
func WithGRPC(register func(grpc.ServiceRegistrar)) Option {
	return func(o *options) { o.registerGRPC = append(o.registerGRPC, register) }
}

// WithSecureGRPC runs a second gRPC server on addr (":15012") with TLS
// configuration cfg, serving the same services as the plaintext one;
// interceptor (such as one that authenticates callers), if not nil, wraps
// its streams alone. It is pkg/grpcserver's server: one goroutine per
// sidecar's connection.
func WithSecureGRPC(addr string, cfg *tls.Config, interceptor grpc.StreamServerInterceptor) Option {
	return func(o *options) { o.secureAddr, o.secureTLS, o.secureIcpt = addr, cfg, interceptor }
}

// WithMetricsRegistry makes istiod register its collectors in reg (so other
// components can share it) instead of a private registry.
func WithMetricsRegistry(reg *prometheus.Registry) Option {
	return func(o *options) { o.registry = reg }
}

// NewElector returns the elector of istiod's singleton (the root
// certificate publisher): in file mode
// (cfg.ConfigDir set) leader.Always, since the process is alone; else
// Leases in the cluster cfg names, as lc says (leader.New). Set it as
// Security.Leader, and call its Wait before exiting.
func NewElector(cfg Config, lc leader.Config, log *slog.Logger) (leader.Elector, error) {
	if cfg.ConfigDir != "" {
		return leader.Always{}, nil
	}
	client, err := kubeClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return leader.New(leader.Clients{Coordination: client.Coordination, Core: client.Core}, lc, log), nil
}
