package istiod

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/debug"
	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
	"github.com/skiff-mesh/skiff/pkg/istiod/metrics"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/memory"
)

// Istiod is a configured istiod with its listeners open.
type Istiod struct {
	cfg     Config
	log     *slog.Logger
	reg     registry.Registry
	xds     *xds.Server
	metrics *metrics.Metrics
	promReg *prometheus.Registry
	mesh    *mesh.Watcher
	// analysis logs each new analysis message once and lists the current
	// ones under /debug/analyze.
	analysis *analysis.Reporter

	grpcServers []*grpcserver.Server
	listeners   []net.Listener // parallel to grpcServers
	httpServers []*http.Server
	httpLis     []net.Listener
	addrs       map[string]string

	pushMu   sync.Mutex
	versions atomic.Uint64
}

// Run starts istiod and serves until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) error {
	d, err := New(ctx, cfg, log, opts...)
	if err != nil {
		return err
	}
	return d.Serve(ctx)
}

// New builds istiod: the registry, the xDS server and bound listeners
// (so tests can use port 0 and read the addresses back).
func New(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (*Istiod, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("istiod config: %w", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
		o.registry.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	d := &Istiod{cfg: cfg, log: log, promReg: o.registry, metrics: metrics.New(o.registry), addrs: map[string]string{}}
	reg, err := newRegistry(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	d.reg = reg
	if d.mesh = o.mesh; d.mesh == nil {
		src := mesh.Source{File: cfg.MeshConfigFile, Namespace: cfg.Namespace, Name: mesh.ConfigMapName(cfg.Revision)}
		if kr, ok := reg.(*kube.Registry); ok {
			src.Client = kr.Clients().Core
		}
		if d.mesh, err = mesh.Watch(ctx, src, log); err != nil {
			return nil, err
		}
	}
	d.analysis = analysis.NewReporter(log)
	var pushDone func(bool)
	var synced func()
	if o.releaseHeap {
		rel := memory.NewReleaser(memory.ReleaserOptions{}, log)
		go rel.Run(ctx)
		pushDone, synced = func(bool) { rel.Updated() }, rel.Updated
	}
	d.xds = xds.New(xds.Options{Log: log, Metrics: d.metrics, PushConcurrency: cfg.PushConcurrency, PushDone: pushDone, Synced: synced,
		Identity: func(ctx context.Context) (xds.Identity, bool) {
			id, ok := IdentityFrom(ctx)
			return xds.Identity{Namespace: id.Namespace, ServiceAccount: id.ServiceAccount}, ok
		},
		SystemNamespace:  cfg.Namespace,
		ControlPlane:     xds.ControlPlane{ID: cfg.PodName, Version: IstioVersion, Revision: cfg.Revision},
		DebugAuthOff:     cfg.DebugAuthOff,
		IdentityCheckOff: cfg.XDSIdentityCheckOff,
	})

	if err := d.addGRPC("grpc", cfg.GRPCAddr, NewGRPCServer(nil, d.keepalive(), nil, log), o.registerGRPC); err != nil {
		d.closeListeners()
		return nil, err
	}
	if o.secureAddr != "" {
		s := NewGRPCServer(o.secureTLS, d.keepalive(), o.secureIcpt, log)
		if err := d.addGRPC("grpc-tls", o.secureAddr, s, o.registerGRPC); err != nil {
			d.closeListeners()
			return nil, err
		}
	}
	if cfg.MonitoringAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /ready", d.ready)
		mux.HandleFunc("GET /version", serveVersion)
		if err := d.addHTTP("monitoring", cfg.MonitoringAddr, mux); err != nil {
			d.closeListeners()
			return nil, err
		}
	}
	if cfg.DebugAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET "+debug.AnalyzePath, debug.Analyze(d.analysis.Messages))
		mux.HandleFunc("GET /version", serveVersion) // for tools given this address alone
		mux.Handle("/", debug.Handler(d.xds, reg))
		d.xds.SetDebugHandler(mux)
		if err := d.addHTTP("debug", cfg.DebugAddr, mux); err != nil {
			d.closeListeners()
			return nil, err
		}
	}
	return d, nil
}

func newRegistry(ctx context.Context, cfg Config, log *slog.Logger) (registry.Registry, error) {
	if cfg.ConfigDir != "" {
		r := file.New(cfg.ConfigDir, log)
		if err := r.Load(); err != nil {
			return nil, err
		}
		return r, nil
	}
	kc, err := kubeClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes registry: %w", err)
	}
	r, err := kube.New(kube.Config{Clients: kc}, log)
	if err != nil {
		return nil, fmt.Errorf("kubernetes registry: %w", err)
	}
	return r, nil
}

// keepalive returns the gRPC servers' keepalive parameters.
func (d *Istiod) keepalive() keepalive.ServerParameters {
	k := d.cfg.Keepalive
	p := keepalive.ServerParameters{Time: k.Interval, Timeout: k.Timeout}
	if k.MaxConnectionAge > 0 {
		// As Istio: open streams get 10 s more, then the proxy reconnects.
		p.MaxConnectionAge, p.MaxConnectionAgeGrace = k.MaxConnectionAge, 10*time.Second
	}
	return p
}

// NewGRPCServer returns a gRPC server as istiod runs one on each of its
// ports (xDS, CA): pkg/grpcserver with istiod's codec and limits, TLS when
// cfg is set, keepalive ka and, if not nil, interceptor around its
// streams. A sidecar's connection is one reader goroutine (and its
// stream's handler) instead of grpc-go's four goroutines and transport,
// and the sender writes each frame in one TLS record from a pooled buffer
// no idle connection keeps (docs/benchmarks.md, istiod xDS, "one goroutine
// per connection"). Tools that measure a service as istiod serves it use
// it too.
func NewGRPCServer(cfg *tls.Config, ka keepalive.ServerParameters, interceptor grpc.StreamServerInterceptor, log *slog.Logger) *grpcserver.Server {
	o := grpcserver.Options{
		TLS: cfg, Codec: xds.Codec(), StreamInterceptor: interceptor, Keepalive: ka,
		Enforcement:          keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true},
		MaxRecvSize:          4 << 20,
		MaxConcurrentStreams: 100000,
		Log:                  log,
	}
	// A stream waiting for the receive budget holds up to its window of
	// its message. On the TLS port a sidecar's records then also stay
	// under 4 KiB, and so does the buffer crypto/tls keeps for its
	// connection (18 KiB after a sidecar's first subscriptions with
	// HTTP/2's 64 KiB): 93 against 103 MiB at rest at 1000 sidecars, for a
	// fifth more CPU when they all reconnect with ~100 KiB of versions each
	// (docs/benchmarks.md, istiod xDS, "a small receive window"). The
	// plaintext port keeps no such buffer: 16 KiB there takes the peak of
	// that reconnect from 191-210 to 136-149 MiB for CPU within the runs'
	// spread, where 4 KiB saves 15 MiB more for a third more CPU ("the
	// plaintext port's window").
	o.StreamWindow = 16 << 10
	if cfg != nil {
		o.StreamWindow = 4 << 10
	}
	return grpcserver.New(o)
}

func (d *Istiod) addGRPC(name, addr string, g *grpcserver.Server, register []func(grpc.ServiceRegistrar)) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s %s: %w", name, addr, err)
	}
	d.xds.Register(g)
	for _, r := range register {
		r(g)
	}
	d.grpcServers, d.listeners = append(d.grpcServers, g), append(d.listeners, lis)
	d.addrs[name] = lis.Addr().String()
	return nil
}

func (d *Istiod) addHTTP(name, addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s %s: %w", name, addr, err)
	}
	d.httpServers = append(d.httpServers, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second})
	d.httpLis = append(d.httpLis, lis)
	d.addrs[name] = lis.Addr().String()
	return nil
}

func (d *Istiod) closeListeners() {
	for _, l := range append(d.listeners, d.httpLis...) {
		l.Close()
	}
}

// Addr returns the bound address of a listener: "grpc", "grpc-tls",
// "monitoring" or "debug" ("" when not running).
func (d *Istiod) Addr(name string) string { return d.addrs[name] }

// WatchMesh follows the mesh config as istiod does (the --meshConfig file,
// else in Kubernetes mode the istio[-REVISION] ConfigMap) until ctx ends.
func WatchMesh(ctx context.Context, cfg Config, log *slog.Logger) (*mesh.Watcher, error) {
	src := mesh.Source{File: cfg.MeshConfigFile, Namespace: cfg.Namespace, Name: mesh.ConfigMapName(cfg.Revision)}
	if cfg.ConfigDir == "" {
		kc, err := kubeClients(cfg)
		if err != nil {
			return nil, fmt.Errorf("mesh config: %w", err)
		}
		src.Client = kc.Core
	}
	return mesh.Watch(ctx, src, log)
}

// Mesh returns the mesh config watcher.
func (d *Istiod) Mesh() *mesh.Watcher { return d.mesh }

// Synced reports whether the registry has read its source once.
func (d *Istiod) Synced() bool { return d.reg.Synced() }

// Inputs returns the registry's current objects.
func (d *Istiod) Inputs() *model.Inputs { return d.reg.Inputs() }

// XDS returns the xDS server.
func (d *Istiod) XDS() *xds.Server { return d.xds }

// Serve pushes the initial config, watches the registry and serves until
// ctx ends, then stops every server.
func (d *Istiod) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, len(d.grpcServers)+len(d.httpServers)+1)
	if d.reg.Synced() {
		d.push(time.Now(), false)
	}
	deb := xds.NewDebouncer(xds.Debounce{After: d.cfg.DebounceAfter, Max: d.cfg.DebounceMax}, func(first time.Time) {
		d.push(first, false)
	})
	wg.Go(func() { deb.Run(ctx) })
	d.mesh.Subscribe(func(*meshconfig.MeshConfig) { deb.Notify() })
	wg.Go(func() {
		if err := d.reg.Run(ctx, func() { d.changed(deb) }); err != nil {
			errc <- fmt.Errorf("registry: %w", err)
		}
	})
	for i, g := range d.grpcServers {
		wg.Go(func() {
			if err := g.Serve(d.listeners[i]); err != nil && !errors.Is(err, grpcserver.ErrServerStopped) {
				errc <- fmt.Errorf("grpc serve: %w", err)
			}
		})
	}
	for i, h := range d.httpServers {
		wg.Go(func() {
			if err := h.Serve(d.httpLis[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http serve: %w", err)
			}
		})
	}
	d.log.Info("istiod serving", "grpc", d.addrs["grpc"], "monitoring", d.addrs["monitoring"], "debug", d.addrs["debug"])
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	for _, g := range d.grpcServers {
		g.Stop()
	}
	for _, h := range d.httpServers {
		h.Close()
	}
	wg.Wait()
	return err
}

// changed handles a registry change. An endpoint-only change goes at once
// when the debouncer is quiet (or always, with EDS debounce off); the
// rest waits for the debounce.
func (d *Istiod) changed(deb *xds.Debouncer) {
	endpoints := func() bool { return d.push(time.Now(), true) }
	if d.cfg.EDSDebounce {
		deb.Lead(endpoints)
		return
	}
	if !endpoints() {
		deb.Notify()
	}
}

// push builds a push context from the registry and pushes what changed,
// reporting whether it handled the change. With endpointsOnly, it handles
// only a change that is not a full one; a configuration change is left
// before the rebuild, which the debounced push will make.
func (d *Istiod) push(first time.Time, endpointsOnly bool) bool {
	d.pushMu.Lock()
	defer d.pushMu.Unlock()
	start := time.Now()
	prev := d.xds.PushContext()
	in := *d.reg.Inputs() // shallow: the objects are shared, never mutated
	in.Mesh = d.mesh.Mesh()
	in.Domain = d.cfg.Domain
	if endpointsOnly && (prev == nil || !prev.SameConfig(&in)) {
		return false
	}
	version := strconv.FormatUint(d.versions.Add(1), 10)
	pc := model.Rebuild(prev, &in, start.UTC().Format("2006-01-02T15:04:05Z")+"/"+version)
	change := pc.Diff(prev)
	if endpointsOnly && change.Full {
		return false
	}
	if change.Empty() {
		return true
	}
	if change.Full {
		d.analysis.Analyze(&in)
	}
	pc.Inherit(prev, change)
	if d.metrics != nil {
		d.metrics.Debounce.Observe(start.Sub(first).Seconds())
		d.metrics.Services.Set(float64(len(pc.Services)))
		d.metrics.VirtualServices.Set(float64(len(pc.VirtualServices)))
		d.metrics.ConfigErrors.Set(float64(len(d.reg.Problems())))
		kind := "endpoint"
		if change.Full {
			kind = "full"
		}
		d.metrics.Trigger(kind)
	}
	d.log.Debug("push", "version", pc.Version, "full", change.Full, "hosts", len(change.Hosts), "build", time.Since(start))
	d.xds.Push(pc, change)
	return true
}

// ready answers 200 once the registry is read and a push context exists.
func (d *Istiod) ready(w http.ResponseWriter, _ *http.Request) {
	if !d.reg.Synced() || d.xds.PushContext() == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}
