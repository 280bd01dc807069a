package xdsproxy_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// TestClustersBeforeTheFirstNameTable: the agent's own stream asks for
// clusters first, so istiod's service ports reach the DNS proxy before the
// first NameTable and its answers are built once at start-up, not twice.
func TestClustersBeforeTheFirstNameTable(t *testing.T) {
	addr := freeAddr(t)
	stop := startIstiod(t, addr)
	defer stop()

	events := make(chan string, 16)
	p := xdsproxy.New(xdsproxy.Options{Upstream: dial(t, addr), Node: node,
		OnNameTable: func(*nds.NameTable) { events <- "name table" },
		OnClusters: func(names []string) {
			if len(names) > 0 {
				events <- "clusters"
			}
		}}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx, filepath.Join(t.TempDir(), "XDS")); close(done) }()
	defer func() { cancel(); <-done }()
	var got []string
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(15 * time.Second):
			t.Fatalf("after 15 s only %q", got)
		}
	}
	if got[0] != "clusters" || got[1] != "name table" {
		t.Errorf("first pushes %q, want clusters then the name table", got)
	}
}
