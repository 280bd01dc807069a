package istiod_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
)

// meshDir copies examples/mesh into a temporary directory, leaving out the
// files in skip.
func meshDir(t *testing.T, skip ...string) string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "mesh")
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") || contains(skip, e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), string(b))
	}
	return dir
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// writeFile replaces a file the way editors do: write aside, then rename.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startIstiod runs istiod on loopback port 0 until the test ends.
func startIstiod(t *testing.T, cfg istiod.Config) *istiod.Istiod {
	t.Helper()
	cfg.GRPCAddr, cfg.MonitoringAddr, cfg.DebugAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if cfg.DebounceAfter == 0 {
		cfg.DebounceAfter, cfg.DebounceMax = 20*time.Millisecond, time.Second
	}
	if cfg.PushConcurrency == 0 {
		cfg.PushConcurrency = 10
	}
	cfg.EDSDebounce = true
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := istiod.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("istiod: %v", err)
		}
	})
	return d
}

// testWriter sends logs to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

var _ io.Writer = testWriter{}

// reviewsSlices renders one EndpointSlice per reviews version.
func reviewsSlices(v1, v2 *proxylesstest.Backend) string {
	one := func(name, ip, pod string, port int) string {
		return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels: {kubernetes.io/service-name: reviews}
addressType: IPv4
ports:
- {name: grpc, port: %d}
endpoints:
- addresses: [%q]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: %s}
`, name, port, ip, pod)
	}
	return one("reviews-v1", "127.0.0.11", "reviews-v1-0", v1.Port) + "---\n" + one("reviews-v2", "127.0.0.12", "reviews-v2-0", v2.Port)
}
