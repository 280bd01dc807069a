package proxylesstest_test

import (
	"time"

	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestRoundTrip is the harness's own check: a service of two backends
// reached through istiod and grpc-go's xDS resolver, and a file edit seen.
func TestRoundTrip(t *testing.T) {
	m := proxylesstest.NewMesh(t)
	a := proxylesstest.StartBackend(t, "127.0.0.41", "a", "version=v1")
	b := proxylesstest.StartBackend(t, "127.0.0.42", "b", "version=v2")
	m.Write("echo.yaml", proxylesstest.Service("echo", "default", 7070, a)...)
	d := m.Start(nil)
	c := proxylesstest.Client(t, d.Addr("grpc"), proxylesstest.Target("echo", "default", 7070), "default")
	if got := proxylesstest.Tally(t.Context(), c, 10); got["a"] != 10 {
		t.Fatalf("want 10 answers from a, got %v", got)
	}
	m.Write("echo.yaml", proxylesstest.Service("echo", "default", 7070, b)...)
	polltest.Within(t, 15*time.Second, "answers from b after the edit", func() bool {
		name, err := proxylesstest.Call(t.Context(), c)
		return err == nil && name == "b"
	})
}
