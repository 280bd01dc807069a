package envoy

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

var fakeProxy string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakeproxy")
	if err != nil {
		panic(err)
	}
	fakeProxy = filepath.Join(dir, "envoy")
	if out, err := exec.Command("go", "build", "-o", fakeProxy, "./testdata/fakeproxy").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type harness struct {
	p   *Proxy
	log string
}

func newHarness(t *testing.T, crashes int) *harness {
	port := adminPort(t)
	h := &harness{log: filepath.Join(t.TempDir(), "events")}
	t.Setenv("FAKEPROXY_LOG", h.log)
	t.Setenv("FAKEPROXY_ADMIN_PORT", strconv.Itoa(port))
	t.Setenv("FAKEPROXY_CRASH", strconv.Itoa(crashes))
	h.p = &Proxy{Binary: fakeProxy, Bootstrap: "/etc/envoy.json", AdminPort: port, DrainTime: 45 * time.Second,
		TerminationDrain: 300 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	return h
}

// adminPort picks the stand-in's admin port, fixed across its restarts as
// Envoy's is. It lies below the kernel's ephemeral range, so no other
// test's outgoing connection can be holding it when a restart binds it.
func adminPort(t *testing.T) int {
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free admin port")
	return 0
}

func (h *harness) events() string { b, _ := os.ReadFile(h.log); return string(b) }

func (h *harness) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	if !polltest.Wait(polltest.Timeout, func() bool { return strings.Count(h.events(), s) >= n }) {
		t.Fatalf("no %d× %q in the proxy's events after %v:\n%s", n, s, polltest.Timeout, h.events())
	}
}

func TestArgs(t *testing.T) {
	p := &Proxy{Bootstrap: "b.json", DrainTime: 45 * time.Second, Concurrency: 2}
	got := strings.Join(p.Args(), " ")
	for _, want := range []string{"-c b.json", "--drain-time-s 45", "--drain-strategy immediate", "--disable-hot-restart", "--concurrency 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
}

func TestRestartsOnCrashThenDrainsOnStop(t *testing.T) {
	h := newHarness(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx, slog.New(slog.DiscardHandler), sigs) }()
	h.waitFor(t, "ready", 1)
	if n := strings.Count(h.events(), "crash"); n != 2 {
		t.Errorf("crashes before ready: %d, want 2", n)
	}
	sigs <- syscall.SIGHUP
	h.waitFor(t, "signal hangup", 1)
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after stop: %v", err)
	}
	ev := h.events()
	if !strings.Contains(ev, "drain POST inboundonly&graceful") || !strings.Contains(ev, "signal terminated") {
		t.Errorf("stop did not drain then terminate:\n%s", ev)
	}
	if strings.Index(ev, "drain POST") > strings.Index(ev, "signal terminated") {
		t.Error("terminated before draining")
	}
	if d := time.Since(start); d < h.p.TerminationDrain {
		t.Errorf("stopped after %s, before the termination drain duration", d)
	}
}

func TestCleanExitEndsRun(t *testing.T) {
	h := newHarness(t, 0)
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- h.p.Run(context.Background(), slog.New(slog.DiscardHandler), sigs) }()
	h.waitFor(t, "ready", 1)
	sigs <- syscall.SIGTERM // forwarded: the proxy exits 0 and the agent with it
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when the proxy exited cleanly")
	}
	if strings.Count(h.events(), "start ") != 1 {
		t.Errorf("restarted after a clean exit:\n%s", h.events())
	}
}

func TestCrashAfterReadyRestarts(t *testing.T) {
	h := newHarness(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx, slog.New(slog.DiscardHandler), sigs) }()
	h.waitFor(t, "ready", 1)
	sigs <- syscall.SIGUSR1 // makes the stand-in exit 7
	h.waitFor(t, "ready", 2)
	cancel()
	<-done
}
