// Package proxylesstest runs proxyless gRPC meshes for tests: istiod in
// file mode on a directory of YAML the test writes, gRPC backends on
// loopback addresses, and clients that dial through grpc-go's own xDS
// resolver, so every policy test makes real RPCs through real xDS.
package proxylesstest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Mesh is a directory of registry and config YAML that istiod watches.
type Mesh struct {
	// Dir is the directory istiod reads (--config-dir).
	Dir string
	t   testing.TB
}

// NewMesh returns an empty mesh directory, removed when the test ends.
func NewMesh(t testing.TB) *Mesh {
	t.Helper()
	return &Mesh{Dir: t.TempDir(), t: t}
}

// Write replaces the file name with the YAML documents docs, the way
// editors do (write aside, then rename), so istiod never reads half a file.
func (m *Mesh) Write(name string, docs ...string) {
	m.t.Helper()
	path := filepath.Join(m.Dir, name)
	tmp := filepath.Join(m.Dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		m.t.Fatal(err)
	}
}

// Remove deletes the file name.
func (m *Mesh) Remove(name string) {
	m.t.Helper()
	if err := os.Remove(filepath.Join(m.Dir, name)); err != nil {
		m.t.Fatal(err)
	}
}

// Start runs istiod on the mesh until the test ends, on loopback port 0,
// with a short debounce; edit, if not nil, changes the configuration
// first. Its log goes to the test's log.
func (m *Mesh) Start(edit func(*istiod.Config)) *istiod.Istiod {
	m.t.Helper()
	cfg := istiod.DefaultConfig()
	cfg.ConfigDir = m.Dir
	cfg.GRPCAddr, cfg.MonitoringAddr, cfg.DebugAddr = "127.0.0.1:0", "", "127.0.0.1:0"
	cfg.DebounceAfter, cfg.DebounceMax, cfg.PushConcurrency = 20*time.Millisecond, time.Second, 10
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(logWriter{m.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := istiod.New(ctx, cfg, log)
	if err != nil {
		cancel()
		m.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	m.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			m.t.Errorf("istiod: %v", err)
		}
	})
	return d
}

// logWriter sends log lines to the test's log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// Host is the host name of a Kubernetes service in the default cluster
// domain (cluster.local).
func Host(name, ns string) string { return HostIn(name, ns, model.DefaultDomain) }

// HostIn is the host name of a Kubernetes service in the cluster domain
// istiod serves (Config.Domain).
func HostIn(name, ns, domain string) string { return model.KubeHostnameIn(name, ns, domain) }

// Target is the xds:/// target of a service port in the default domain.
func Target(name, ns string, port int) string { return TargetIn(name, ns, model.DefaultDomain, port) }

// TargetIn is the xds:/// target of a service port in a cluster domain.
func TargetIn(name, ns, domain string, port int) string {
	return fmt.Sprintf("xds:///%s:%d", HostIn(name, ns, domain), port)
}
