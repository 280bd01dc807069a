// Package agent is pilot-agent's "proxy" command: it wires the workload
// certificate, the SDS server, the xDS proxy, the DNS proxy, the status
// server and the proxy process together, and runs them until it is stopped.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/bootstrap"
	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy"
	"github.com/skiff-mesh/skiff/pkg/agent/envoy"
	"github.com/skiff-mesh/skiff/pkg/agent/sds"
	"github.com/skiff-mesh/skiff/pkg/agent/status"
	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/grpcsock"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// Options are the agent's run-time seams.
type Options struct {
	// ResolvConf is the pod's resolv.conf ("" is /etc/resolv.conf).
	ResolvConf string
	// StatusAddr overrides the status server's address (":15020").
	StatusAddr string
	// ReadinessAddr is where the agent serves /healthz/ready itself when no
	// proxy runs (":15021"); "-" disables it.
	ReadinessAddr string
	// Stdout and Stderr receive the proxy's output.
	Stdout, Stderr io.Writer
	// Signals are forwarded to the proxy.
	Signals <-chan os.Signal
	// Ready, when set, is closed once the agent is first ready.
	Ready chan<- struct{}
	// ReleaseHeap returns the heap to the OS after start-up and after each
	// big update (memory.Releaser). The Go runtime is the process's: set it
	// only where one agent runs in the process (pilot-agent's main does,
	// unless GOGC=off).
	ReleaseHeap bool
}

// Run runs the agent until ctx ends (then drains the proxy) or the proxy exits.
func Run(ctx context.Context, cfg *config.Config, opts Options, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg := promtext.NewRegistry()
	noProxy := cfg.DisableEnvoy || cfg.GRPCBootstrap != ""

	// The connection to istiod: it presents the workload certificate once
	// the manager below has one (no handshake happens before the first RPC).
	var certsOf atomic.Pointer[certs.Manager]
	upstream, err := dialIstiod(cfg, func() *certs.Cert {
		if m := certsOf.Load(); m != nil {
			return m.Current()
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer upstream.Close()

	// The workload certificate, from istiod's CA over that same connection
	// when the CA is istiod as that connection reaches it (one handshake and
	// one connection on istiod per pod, not two), else over its own.
	copts := certs.Options{Identity: cfg.Identity, KeyType: cfg.KeyType, TTL: cfg.SecretTTL, GraceRatio: cfg.GraceRatio, GraceJitter: cfg.GraceJitter, OutputDir: outputCerts(cfg)}
	var signer certs.Signer
	switch {
	case cfg.FileMountedCerts:
		copts.FileDir = cfg.Path(config.FileCertDir)
	case cfg.CAOnXDSConnection():
		tokenPath := "" // the connection's per-RPC credentials send it
		if cfg.Plaintext {
			tokenPath = cfg.Path(cfg.TokenPath)
		}
		signer = certs.NewCAClient(upstream, tokenPath, cfg.Cluster)
	default:
		ca, err := certs.DialCA(certs.CAOptions{Addr: cfg.CAAddr, Plaintext: cfg.Plaintext, RootCertPath: rootsPath(cfg, cfg.CARoots),
			ServerName: cfg.CAServerName, TokenPath: cfg.Path(cfg.TokenPath), ClusterID: cfg.Cluster})
		if err != nil {
			return err
		}
		defer ca.Close()
		signer = ca
	}
	mgr := certs.NewManager(copts, signer, log)
	certsOf.Store(mgr)

	// The DNS proxy.
	var dns *dnsproxy.Server
	if cfg.DNSProxy() {
		dcfg, err := dnsConfig(cfg, opts.ResolvConf)
		if err != nil {
			return err
		}
		if dns, err = dnsproxy.New(dcfg, log, reg); err != nil {
			return err
		}
		if err := dns.Start(ctx); err != nil {
			return err
		}
		defer dns.Close()
	}

	var wg sync.WaitGroup
	errc := make(chan error, 8)
	run := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	released := heapReleaser(ctx, opts.ReleaseHeap, log, run)
	if dns == nil {
		released() // start-up garbage; with DNS it goes with the first table's
	}

	// The xDS proxy, which also fetches the NameTable.
	xopts := xdsproxy.Options{Upstream: upstream, Node: xdsNode(cfg)}
	if dns != nil {
		xopts.OnNameTable = func(t *nds.NameTable) {
			dns.UpdateTable(t)
			released()
		}
		xopts.OnClusters = func(names []string) {
			dns.UpdateServicePorts(servicePorts(names))
			released()
		}
		// The names come from Envoy's CDS; without Envoy (DISABLE_ENVOY,
		// or a proxyless gRPC app, which asks only for its targets' clusters),
		// the agent asks itself.
		xopts.NoEnvoy = noProxy
	}
	xp := xdsproxy.New(xopts, log)

	// Status and readiness.
	checks := []status.Check{{Name: "workload certificate", Check: func(context.Context) error {
		if mgr.Current() == nil {
			return errors.New("not issued yet")
		}
		return nil
	}}}
	if dns != nil {
		checks = append(checks, status.Check{Name: "DNS proxy", Check: func(context.Context) error {
			if !dns.Ready() {
				return errors.New("no NameTable from istiod yet")
			}
			return nil
		}})
	}
	switch {
	case cfg.GRPCBootstrap != "":
		// As Istio's agent: a proxyless pod is ready once its app can read
		// the bootstrap and the certificate files it names, whether or not
		// the app has opened xDS yet.
		files := []string{cfg.Path(cfg.GRPCBootstrap)}
		if dir := outputCerts(cfg); dir != "" {
			for _, f := range bootstrap.GRPCCertFiles() {
				files = append(files, filepath.Join(dir, f))
			}
		}
		checks = append(checks, status.Check{Name: "gRPC bootstrap", Check: func(context.Context) error {
			for _, f := range files {
				if _, err := os.Stat(f); err != nil {
					return err
				}
			}
			return nil
		}})
	case noProxy:
	default:
		checks = append(checks, status.HTTPCheck("proxy", fmt.Sprintf("http://127.0.0.1:%d/ready", cfg.Proxy.ProxyAdminPort)))
	}
	sopts := status.Options{Probers: cfg.AppProbers, AppHost: cfg.InstanceIP, HTTP1Probes: !cfg.HTTP2Probing, Ready: checks, Registry: reg,
		Quit: cancel, Extra: map[string]http.Handler{}, Profiling: cfg.Profiling}
	if !noProxy {
		sopts.ProxyMetrics = fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", cfg.Proxy.ProxyAdminPort)
		sopts.Drain = func() { _ = envoy.Drain(int(cfg.Proxy.ProxyAdminPort)) }
	}
	if s := cfg.PrometheusScrape; s != nil {
		sopts.AppMetrics = "http://" + net.JoinHostPort(orLocal(cfg.InstanceIP), s.Port) + s.Path
	}
	if dns != nil {
		sopts.Extra["/debug/ndsz"] = dns.NDSZHandler()
	}
	sopts.Extra["/debug/certs"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var out []certs.SecretInfo
		if c := mgr.Current(); c != nil {
			out = c.Describe(time.Now())
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	st := status.New(sopts, log)
	statusAddr := opts.StatusAddr
	if statusAddr == "" {
		statusAddr = ":" + strconv.Itoa(int(cfg.Proxy.StatusPort))
	}

	// Every socket listens before anything is served or reported ready: the
	// proxy's first dial finds the Unix sockets, and a probe after ready
	// finds the status port.
	var lns []net.Listener
	listen := func(what string, l func() (net.Listener, error)) (net.Listener, error) {
		ln, err := l()
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		lns = append(lns, ln)
		return ln, nil
	}
	tcp := func(addr string) func() (net.Listener, error) {
		return func() (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	sdsLn, err := listen("sds", func() (net.Listener, error) { return grpcsock.Listen(cfg.Path(cfg.SDSSocketPath()), 0o600) })
	if err != nil {
		return err
	}
	xdsLn, err := listen("xds proxy", func() (net.Listener, error) { return grpcsock.Listen(cfg.Path(config.XDSSocket), 0) })
	if err != nil {
		return err
	}
	statusLn, err := listen("status", tcp(statusAddr))
	if err != nil {
		return err
	}
	var readyLn net.Listener
	if noProxy && opts.ReadinessAddr != "-" {
		addr := opts.ReadinessAddr
		if addr == "" {
			addr = ":15021"
		}
		if readyLn, err = listen("readiness", tcp(addr)); err != nil {
			return err
		}
	}
	run("certificates", func() error { return mgr.Run(ctx) })
	run("sds", func() error { return sds.New(mgr, log).Serve(ctx, sdsLn) })
	run("xds proxy", func() error { return xp.Serve(ctx, xdsLn) })
	run("status", func() error { return status.Serve(ctx, statusLn, st.Handler()) })
	if readyLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/healthz/ready", st.Handler())
		run("readiness", func() error { return status.Serve(ctx, readyLn, mux) })
	}
	if opts.Ready != nil {
		go signalReady(ctx, st, opts.Ready)
	}

	switch {
	case cfg.GRPCBootstrap != "":
		if err := writeGRPCBootstrap(cfg); err != nil {
			return err
		}
		log.Info("proxyless gRPC bootstrap written", "path", cfg.Path(cfg.GRPCBootstrap))
	case !cfg.DisableEnvoy:
		return runProxy(ctx, cfg, opts, log, errc)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// dnsConfig is the DNS proxy's configuration: upstreams and search domains
// from resolvConf ("" is /etc/resolv.conf), the rest from the agent's.
func dnsConfig(cfg *config.Config, resolvConf string) (dnsproxy.Config, error) {
	if resolvConf == "" {
		resolvConf = "/etc/resolv.conf"
	}
	dcfg, err := dnsproxy.ConfigFromResolvConf(resolvConf)
	if err != nil {
		return dnsproxy.Config{}, fmt.Errorf("DNS proxy: %w", err)
	}
	dcfg.Namespace = cfg.PodNamespace
	if cfg.ClusterDomain != "" {
		dcfg.ClusterDomain = cfg.ClusterDomain
	}
	dcfg.Addrs = cfg.DNSAddrs
	dcfg.ForwardParallel = cfg.DNSForwardParallel
	if t := cfg.DNSForwardTimeout; t > 0 {
		// Istio's timeout is per exchange with one upstream.
		dcfg.AttemptTimeout, dcfg.Timeout = t, max(t, dnsproxy.DefaultTimeout)
	}
	return dcfg, nil
}

func orLocal(ip string) string {
	if ip == "" {
		return "127.0.0.1"
	}
	return ip
}

// signalReady closes ready once every readiness check passes, polled every
// millisecond so that start-up benchmarks see milliseconds.
func signalReady(ctx context.Context, st *status.Server, ready chan<- struct{}) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		if st.Ready(ctx) == nil {
			close(ready)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runProxy writes Envoy's bootstrap and supervises it.
func runProxy(ctx context.Context, cfg *config.Config, opts Options, log *slog.Logger, errc <-chan error) error {
	b := &bootstrap.Envoy{Node: bootstrapNode(cfg), XDSSocket: config.XDSSocket, SDSSocket: "./" + cfg.SDSSocketPath(),
		AdminPort: int(cfg.Proxy.ProxyAdminPort), StatusPort: int(cfg.Proxy.StatusPort), StatsPort: 15090, ReadinessPort: 15021,
		Delta: cfg.DeltaXDS}
	js, err := b.JSON()
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.Path(cfg.Proxy.ConfigPath), config.BootstrapFile)
	if err := bootstrap.Write(path, js); err != nil {
		return err
	}
	p := &envoy.Proxy{Binary: cfg.Proxy.BinaryPath, Bootstrap: path, AdminPort: int(cfg.Proxy.ProxyAdminPort),
		DrainTime: cfg.Proxy.DrainDuration, TerminationDrain: cfg.Proxy.TerminationDrainDuration,
		ExitOnZeroConnections: cfg.ExitOnZeroConnections, MinDrain: cfg.MinDrain,
		IgnoreListeners: envoy.IgnoredListeners(config.EnvoyStatusPort, config.EnvoyPrometheusPort),
		Stdout:          opts.Stdout, Stderr: opts.Stderr}
	if c := cfg.Proxy.Concurrency; c != nil {
		p.Concurrency = int(*c)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, log, opts.Signals) }()
	select {
	case err := <-done:
		return err
	case err := <-errc:
		return err
	}
}

func (t tokenCreds) RequireTransportSecurity() bool { return true }

// servicePorts reads the service ports the DNS proxy's SRV answers need from
// outbound cluster names ("outbound|9080||reviews.default.svc.cluster.local").
func servicePorts(clusters []string) map[string][]dnsproxy.ServicePort {
	out := map[string][]dnsproxy.ServicePort{}
	for _, c := range clusters {
		f := strings.Split(c, "|")
		if len(f) != 4 || f[0] != "outbound" || f[2] != "" {
			continue
		}
		port, err := strconv.ParseUint(f[1], 10, 16)
		if err != nil {
			continue
		}
		out[f[3]] = append(out[f[3]], dnsproxy.ServicePort{Port: uint16(port)})
	}
	return out
}
