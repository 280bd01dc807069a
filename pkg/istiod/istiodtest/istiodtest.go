// Package istiodtest runs a real istiod for other packages' tests: file
// mode on the sample mesh (examples/mesh), gRPC and debug servers on
// loopback ports of its own choosing, stopped when the test ends.
package istiodtest

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod"
)

// MeshDir is the sample mesh's directory (examples/mesh).
func MeshDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "mesh")
}

// Start runs istiod until the test ends; edit, if not nil, changes its
// configuration first. The context it returns ends with the test.
func Start(t testing.TB, edit func(*istiod.Config)) (*istiod.Istiod, context.Context) {
	t.Helper()
	return StartWith(t, edit, slog.New(slog.DiscardHandler))
}

// StartWith is Start with istiod logging to log and given opts.
func StartWith(t testing.TB, edit func(*istiod.Config), log *slog.Logger, opts ...istiod.Option) (*istiod.Istiod, context.Context) {
	t.Helper()
	cfg := istiod.DefaultConfig()
	cfg.ConfigDir = MeshDir()
	cfg.GRPCAddr, cfg.MonitoringAddr, cfg.DebugAddr = "127.0.0.1:0", "", "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := istiod.New(ctx, cfg, log, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = d.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, ctx
}
