package envoy

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCountActive counts as Istio's agent does: listener stats only, no
// per-worker copies, no internal or ignored listeners; -1 for no stat.
func TestCountActive(t *testing.T) {
	ignore := IgnoredListeners(15021, 15090)
	for _, tc := range []struct {
		stats string
		want  int
	}{
		{"", -1},
		{"listener.0.0.0.0_15006.downstream_cx_active: 3\nlistener.10.0.0.1_8080.downstream_cx_active: 2\n", 5},
		{"listener.0.0.0.0_15006.worker_0.downstream_cx_active: 3\nlistener.0.0.0.0_15006.downstream_cx_active: 3\n", 3},
		{"http.inbound_0.0.0.0_8080.downstream_cx_active: 4\nlistener.0.0.0.0_15006.downstream_cx_active: 0\n", 0},
		{"listener.admin.downstream_cx_active: 1\nlistener.0.0.0.0_15021.downstream_cx_active: 2\nlistener.0.0.0.0_15090.downstream_cx_active: 1\n", 0},
		{"listener.envoy_internal_connect_originate.downstream_cx_active: 7\n", 0},
	} {
		if got, err := countActive(strings.NewReader(tc.stats), ignore); err != nil || got != tc.want {
			t.Errorf("%q: %d %v, want %d", tc.stats, got, err, tc.want)
		}
	}
}

// TestExitOnZeroConnections: with ExitOnZeroConnections the proxy is
// drained, left MinDrain, then stopped only once its listeners report no
// connection, however long TerminationDrain is.
func TestExitOnZeroConnections(t *testing.T) {
	h := newHarness(t, 0)
	stats := filepath.Join(t.TempDir(), "stats")
	t.Setenv("FAKEPROXY_STATS", stats)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(stats, []byte("listener.0.0.0.0_15006.downstream_cx_active: 2\nlistener.admin.downstream_cx_active: 1\n"), 0o644))
	h.p.ExitOnZeroConnections, h.p.MinDrain, h.p.CheckEvery = true, 100*time.Millisecond, 20*time.Millisecond
	h.p.TerminationDrain = time.Hour
	h.p.IgnoreListeners = IgnoredListeners(15021, 15090)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx, slog.New(slog.DiscardHandler), nil) }()
	h.waitFor(t, "ready", 1)
	start := time.Now()
	cancel()
	h.waitFor(t, "stats usedonly&filter=downstream_cx_active$", 3) // still two connections: it keeps asking
	if strings.Contains(h.events(), "signal terminated") {
		t.Fatal("stopped with connections left")
	}
	must(os.WriteFile(stats, []byte("listener.0.0.0.0_15006.downstream_cx_active: 0\nlistener.admin.downstream_cx_active: 1\n"), 0o644))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped after its connections ended")
	}
	ev := h.events()
	if !strings.Contains(ev, "drain POST") || !strings.Contains(ev, "signal terminated") || strings.Index(ev, "drain POST") > strings.Index(ev, "stats ") {
		t.Errorf("not drained, then asked, then stopped:\n%s", ev)
	}
	if d := time.Since(start); d < h.p.MinDrain {
		t.Errorf("stopped after %s, before the minimum drain", d)
	}
}
