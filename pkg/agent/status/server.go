// Package status is pilot-agent's status server (15020): readiness, merged
// Prometheus metrics, the app's rewritten probes, and quit/drain hooks.
package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/httpserver"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// Check is one readiness condition; nil means satisfied.
type Check struct {
	Name  string
	Check func(context.Context) error
}

// Options configure the server.
type Options struct {
	Probers map[string]*config.Prober
	// AppHost is where probes go by default (the pod IP).
	AppHost string
	// HTTP1Probes keeps HTTPS probes on HTTP/1.1; by default they
	// negotiate HTTP/2 as the kubelet's do (ISTIO_ENABLE_HTTP2_PROBING=false).
	HTTP1Probes bool
	// Ready lists what must hold before the pod is ready.
	Ready []Check
	// ProxyMetrics and AppMetrics are scraped and merged into /stats/prometheus ("" to skip).
	ProxyMetrics, AppMetrics string
	// Registry holds the agent's own metrics (nil: none).
	Registry *promtext.Registry
	// Quit is called by POST /quitquitquit; Drain by POST /drain. Both localhost only.
	Quit, Drain func()
	// Extra handlers mounted as they are (e.g. /debug/ndsz).
	Extra map[string]http.Handler
	// Profiling serves Go's pprof profiles under /debug/pprof/ to
	// loopback clients (pilot-agent's --profiling, on by default).
	Profiling bool
}

// Server is the status server.
type Server struct {
	opts   Options
	log    *slog.Logger
	prober *prober
	mu     sync.Mutex
	ready  bool
}

// New builds the server.
func New(opts Options, log *slog.Logger) *Server {
	host := opts.AppHost
	if host == "" {
		host = "127.0.0.1"
	}
	return &Server{opts: opts, log: log.With("component", "status"), prober: &prober{host: host, http2: !opts.HTTP1Probes}}
}

// Handler returns the status endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", s.handleReady)
	mux.HandleFunc("/app-health/", s.handleAppHealth)
	mux.HandleFunc("/stats/prometheus", s.handleMetrics)
	mux.HandleFunc("/quitquitquit", s.localPost(s.opts.Quit))
	mux.HandleFunc("/drain", s.localPost(s.opts.Drain))
	for p, h := range s.opts.Extra {
		mux.Handle(p, h)
	}
	if s.opts.Profiling {
		mountProfiling(mux)
	}
	return mux
}

// Ready evaluates every readiness check and returns the first failure.
func (s *Server) Ready(ctx context.Context) error {
	for _, c := range s.opts.Ready {
		if err := c.Check(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	err := s.Ready(r.Context())
	s.mu.Lock()
	changed := s.ready != (err == nil)
	s.ready = err == nil
	s.mu.Unlock()
	if changed {
		s.log.Info("readiness changed", "ready", err == nil, "reason", err)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (s *Server) handleAppHealth(w http.ResponseWriter, r *http.Request) {
	pr, ok := s.opts.Probers[r.URL.Path]
	if !ok {
		http.Error(w, "no probe configured for "+r.URL.Path, http.StatusNotFound)
		return
	}
	if err := s.prober.run(r.Context(), pr); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// handleMetrics merges the proxy's, the app's and the agent's metrics.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	var errs []error
	for _, url := range []string{s.opts.ProxyMetrics, s.opts.AppMetrics} {
		if url == "" {
			continue
		}
		if err := scrape(r.Context(), url, w); err != nil {
			errs = append(errs, err)
		}
	}
	// The agent's own metrics, in the same text format (they follow
	// plain text already written).
	if s.opts.Registry != nil {
		if err := s.opts.Registry.WriteText(w); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.log.Debug("metrics scrape failed", "err", errors.Join(errs...))
	}
}

func scrape(ctx context.Context, url string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	if err == nil {
		_, err = io.WriteString(w, "\n")
	}
	return err
}

// localPost allows only POSTs from loopback, as Istio's agent does.
func (s *Server) localPost(fn func()) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			http.Error(w, "only from localhost", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if fn != nil {
			go fn()
		}
		fmt.Fprintln(w, "OK")
	}
}

// Serve runs h on ln until ctx ends, then closes it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return httpserver.Serve(ctx, srv, ln, 2*time.Second)
}

// HTTPCheck is a readiness check that GETs url and wants 200.
func HTTPCheck(name, url string) Check {
	return Check{Name: name, Check: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		return nil
	}}
}
