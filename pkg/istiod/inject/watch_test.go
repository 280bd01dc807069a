package inject

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestWatchFiles(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	cfgPath, valPath := filepath.Join(dir, "config"), filepath.Join(dir, "values")
	// write replaces a file whole, as the kubelet does, so the watcher never
	// reads half of it.
	write := func(p, s string) {
		if err := os.WriteFile(p+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	write(valPath, `{"revision": "one"}`)
	cfg, err := LoadFiles(cfgPath, valPath) // config missing: the chart's
	if err != nil {
		t.Fatal(err)
	}
	rejected := make(chan string, 1)
	in, err := New(cfg, slog.New(errorHandler(rejected)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.WatchFiles(ctx, cfgPath, valPath, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(rev string) {
		t.Helper()
		polltest.Until(t, "injector revision "+rev, func() bool { return in.Revision() == rev })
	}
	waitFor("one")
	write(valPath, `{"revision": "two"}`)
	waitFor("two")
	write(valPath, `{"global": {"proxy": {"statusPort": "nope"}}, "revision": "three"}`) // invalid: kept
	select {
	case msg := <-rejected:
		if rev := in.Revision(); rev != "two" {
			t.Fatalf("after %q: revision %q, want the current one kept (two)", msg, rev)
		}
	case <-time.After(polltest.Timeout):
		t.Fatalf("invalid configuration not reported; revision %q", in.Revision())
	}
	write(cfgPath, "policy: disabled\n")
	write(valPath, `{"revision": "four"}`)
	waitFor("four")
	if res, _ := in.Inject(appPod(), ""); res.Injected {
		t.Error("policy: disabled not applied")
	}
}

// errorHandler is a slog.Handler that sends the message of each error
// record (the watcher logs one per rejected configuration) to its channel
// when the channel has room, and drops every other record.
type errorHandler chan<- string

func (h errorHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h errorHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}

func (h errorHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h errorHandler) WithGroup(string) slog.Handler { return h }
