package istiod_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// syncBuffer is a log sink safe for the goroutines of a running istiod.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeapReleasedAfterPush: with WithHeapRelease, istiod returns its heap
// once its first push has reached every connection (none here).
func TestHeapReleasedAfterPush(t *testing.T) {
	var logs syncBuffer
	cfg := istiod.DefaultConfig()
	cfg.ConfigDir = istiodtest.MeshDir()
	cfg.GRPCAddr, cfg.MonitoringAddr, cfg.DebugAddr = "127.0.0.1:0", "", ""
	ctx, cancel := context.WithCancel(t.Context())
	d, err := istiod.New(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)), istiod.WithHeapRelease())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = d.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	polltest.Until(t, "istiod to return its heap after the first push", func() bool {
		return strings.Contains(logs.String(), "heap returned to the OS after an update")
	})
}
