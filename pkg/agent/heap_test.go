package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent"
)

// recordHandler passes each record's message to msgs (dropping when full).
type recordHandler struct{ msgs chan string }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}

// TestAgentReleasesHeapAndServesProfiles: with ReleaseHeap the agent
// returns its heap to the OS once the NameTable is in place, and with
// Profiling its status port serves the heap profile to loopback.
func TestAgentReleasesHeapAndServesProfiles(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := podEnv(t, m, "DISABLE_ENVOY=true")
	cfg.Profiling = true
	msgs := make(chan string, 256)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, cfg, agent.Options{ResolvConf: resolv, ReadinessAddr: "-", Stdout: io.Discard, Stderr: io.Discard, ReleaseHeap: true},
			slog.New(recordHandler{msgs}))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	timeout := time.After(30 * time.Second)
	for released := false; !released; {
		select {
		case msg := <-msgs:
			released = strings.HasPrefix(msg, "heap returned to the OS")
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		case <-timeout:
			t.Fatal("no heap release within 30 s of the start")
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", cfg.Proxy.StatusPort))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), "heap profile:") {
		t.Errorf("heap profile: %s %.100q", resp.Status, b)
	}
}
