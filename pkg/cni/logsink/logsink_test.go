package logsink

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/cni/pluginlog"
	"github.com/skiff-mesh/skiff/pkg/httpserver"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// serve runs the sink on dir's socket, logging at lvl, until the test ends.
func serve(t *testing.T, dir string, lvl slog.Level) *logtest.Buffer {
	out := &logtest.Buffer{}
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- httpserver.Serve(ctx, &http.Server{Handler: Handler(log)}, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return out
}

// waitFor waits until the sink has printed want.
func waitFor(t *testing.T, out *logtest.Buffer, want string) {
	t.Helper()
	polltest.Until(t, "the sink printing "+want, func() bool { return strings.Contains(out.String(), want) })
}

func TestShippedRecordsArePrinted(t *testing.T) {
	dir := t.TempDir()
	out := serve(t, dir, slog.LevelInfo)
	if st, err := os.Stat(filepath.Join(dir, pluginlog.SocketName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, %v; want mode 0600", st, err)
	}
	b := pluginlog.NewBuffer(slog.LevelDebug)
	log := slog.New(b).With("component", "istio-cni")
	log.Debug("below the sink's level")
	log.Info("traffic capture installed", "pod", "default/shell")
	log.Error("ADD failed", "pod", "default/other", "err", "boom")
	if err := pluginlog.Ship(dir, b.Records()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "ADD failed")
	got := out.String()
	for _, want := range []string{
		`level=INFO msg="traffic capture installed" scope=cni-plugin component=istio-cni pod=default/shell`,
		`level=ERROR msg="ADD failed" scope=cni-plugin component=istio-cni err=boom pod=default/other`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "below the sink's level") {
		t.Errorf("a debug record printed at info:\n%s", got)
	}
	// The plugin's own time is kept.
	rec, err := Parse(string(b.Records()[1].JSON))
	if err != nil || time.Since(rec.Time) > time.Minute {
		t.Errorf("Parse time %v, %v", rec.Time, err)
	}
}

func TestBadPostsAreReported(t *testing.T) {
	dir := t.TempDir()
	out := serve(t, dir, slog.LevelInfo)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, pluginlog.SocketName))
	}}}
	for _, tc := range []struct {
		body, log string
		code      int
	}{
		{`{"not":"an array"}`, "not a JSON array of strings", http.StatusBadRequest},
		{`["not json", "{\"level\":\"loud\",\"msg\":\"m\",\"time\":\"2026-12-06T16:00:00Z\"}", "{\"level\":\"info\",\"msg\":\"fine\",\"time\":\"2026-12-06T16:00:00Z\"}"]`, "fine", http.StatusOK},
	} {
		resp, err := c.Post("http://unix"+pluginlog.Path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d", tc.body, resp.StatusCode, tc.code)
		}
		waitFor(t, out, tc.log)
	}
	got := out.String()
	for _, want := range []string{`msg="plugin log record not understood"`, `level \"loud\" is not debug, info, warn or error`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestListenReplacesAndKeepsTheNewerSocket(t *testing.T) {
	dir := t.TempDir()
	first, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Listen(dir) // a rolling update's new node agent
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, pluginlog.SocketName)
	first.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the first agent's stop removed the second's socket: %v", err)
	}
	second.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after the last agent stopped: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"level":"info","time":"2026-12-06T16:00:00.123456789Z","msg":"m","pod":"a/b","n":1}`)
	f.Add(`{"level":"debug","time":"2026-12-06T16:00:00Z","msg":"","nested":{"a":[1,2]}}`)
	f.Add(`{"level":"fatal","msg":1}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		rec, err := Parse(s)
		if err != nil {
			return
		}
		if rec.Level < slog.LevelDebug || rec.Level > slog.LevelError {
			t.Errorf("level %v from %q", rec.Level, s)
		}
	})
}
