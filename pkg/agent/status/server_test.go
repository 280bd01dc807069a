package status

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// TestAppProbes runs the rewritten probes against real HTTP, TCP and gRPC
// servers on loopback and checks they come from 127.0.0.6.
func TestAppProbes(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	var from atomic.Value
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from.Store(r.RemoteAddr)
		if r.URL.Path != "/healthz" || r.Header.Get("X-Custom") != "yes" || !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer app.Close()
	_, httpPort, _ := net.SplitHostPort(app.Listener.Addr().String())

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, tcpPort, _ := net.SplitHostPort(tcp.Addr().String())

	gl, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(gl) }()
	defer gs.Stop()
	grpcPort := gl.Addr().(*net.TCPAddr).Port

	probers, err := config.ParseProbers(`{
		"/app-health/app/livez": {"httpGet": {"path": "/healthz", "port": ` + httpPort + `, "httpHeaders": [{"name": "X-Custom", "value": "yes"}]}},
		"/app-health/app/readyz": {"tcpSocket": {"port": ` + tcpPort + `}},
		"/app-health/app/startupz": {"grpc": {"port": ` + strconv.Itoa(grpcPort) + `}, "timeoutSeconds": 2}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Probers: probers}, slog.New(slog.DiscardHandler))
	h := s.Handler()
	for _, p := range []string{"/app-health/app/livez", "/app-health/app/readyz", "/app-health/app/startupz"} {
		if code, body := get(t, h, p); code != 200 {
			t.Errorf("%s = %d %s", p, code, body)
		}
	}
	if f, _ := from.Load().(string); !strings.HasPrefix(f, "127.0.0.6:") {
		t.Errorf("HTTP probe came from %q, want 127.0.0.6", f)
	}
	healthy.Store(false)
	if code, _ := get(t, h, "/app-health/app/livez"); code != http.StatusServiceUnavailable {
		t.Errorf("unhealthy HTTP app: %d", code)
	}
	tcp.Close()
	if code, _ := get(t, h, "/app-health/app/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("closed TCP port: %d", code)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if code, _ := get(t, h, "/app-health/app/startupz"); code != http.StatusServiceUnavailable {
		t.Errorf("NOT_SERVING gRPC app: %d", code)
	}
	if code, _ := get(t, h, "/app-health/other/livez"); code != http.StatusNotFound {
		t.Errorf("unknown probe: %d", code)
	}
}

func TestReadinessTransitions(t *testing.T) {
	var certReady atomic.Bool
	s := New(Options{Ready: []Check{{Name: "certificate", Check: func(context.Context) error {
		if !certReady.Load() {
			return errors.New("no workload certificate yet")
		}
		return nil
	}}}}, slog.New(slog.DiscardHandler))
	h := s.Handler()
	if code, body := get(t, h, "/healthz/ready"); code != 503 || !strings.Contains(body, "certificate: no workload certificate yet") {
		t.Errorf("not ready: %d %q", code, body)
	}
	certReady.Store(true)
	if code, _ := get(t, h, "/healthz/ready"); code != 200 {
		t.Errorf("ready: %d", code)
	}
}

func TestMetricsMerge(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "envoy_cluster_upstream_cx_total 3") }))
	defer proxy.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "app_requests_total 7") }))
	defer app.Close()
	reg := promtext.NewRegistry()
	c := promtext.NewCounter("istio_agent_test_total", "test")
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	c.Inc()
	s := New(Options{ProxyMetrics: proxy.URL, AppMetrics: app.URL, Registry: reg}, slog.New(slog.DiscardHandler))
	_, body := get(t, s.Handler(), "/stats/prometheus")
	for _, want := range []string{"envoy_cluster_upstream_cx_total 3", "app_requests_total 7", "istio_agent_test_total 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("merged metrics lack %q:\n%s", want, body)
		}
	}
}

func TestQuitIsLocalPostOnly(t *testing.T) {
	quit := make(chan struct{}, 1)
	s := New(Options{Quit: func() { quit <- struct{}{} }}, slog.New(slog.DiscardHandler))
	h := s.Handler()
	req := httptest.NewRequest(http.MethodPost, "/quitquitquit", nil)
	req.RemoteAddr = "10.1.2.3:5000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("remote quit: %d", rec.Code)
	}
	req = httptest.NewRequest(http.MethodPost, "/quitquitquit", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("local quit: %d", rec.Code)
	}
	<-quit
}
