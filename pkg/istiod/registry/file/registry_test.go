package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const svcYAML = `apiVersion: v1
kind: Service
metadata: {name: %s, namespace: default}
spec: {clusterIP: 10.0.0.%d, ports: [{name: http, port: 80}]}
`

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func svc(name string, n int) string { return fmt.Sprintf(svcYAML, name, n) }

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svc("a", 1))
	write(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 0}]}\n")
	write(t, filepath.Join(dir, "README.md"), "not config")
	r := New(dir, slog.New(slog.DiscardHandler))
	var changes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx, func() { changes.Add(1) }) }()
	defer func() { cancel(); <-done }()

	polltest.Until(t, "initial load", func() bool { return r.Synced() && changes.Load() >= 1 })
	if got := len(r.Inputs().Services); got != 1 {
		t.Fatalf("%d services, want 1 (bad.yaml skipped)", got)
	}
	if p := r.Problems(); len(p) != 1 || !strings.Contains(p[0].Error(), "bad.yaml: document 1 (Service default/bad): spec.ports[0].port: 0") {
		t.Fatalf("problems %v", p)
	}

	before := r.Inputs().Services[0]
	write(t, filepath.Join(dir, "sub", "b.yaml"), svc("b", 2))
	polltest.Until(t, "new directory and file", func() bool { return len(r.Inputs().Services) == 2 })
	if r.Inputs().Services[0] != before {
		t.Error("an unchanged file was parsed again (objects should keep their pointers)")
	}

	write(t, filepath.Join(dir, "bad.yaml"), svc("fixed", 3))
	polltest.Until(t, "fixed file", func() bool { return len(r.Inputs().Services) == 3 && len(r.Problems()) == 0 })

	write(t, filepath.Join(dir, "dup.yaml"), svc("a", 4))
	polltest.Until(t, "duplicate reported", func() bool { return len(r.Problems()) == 1 })
	if p := r.Problems()[0].Error(); !strings.Contains(p, "duplicate") || !strings.Contains(p, "a.yaml") {
		t.Errorf("duplicate problem %q", p)
	}

	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "removal", func() bool {
		ss := r.Inputs().Services
		return len(ss) == 3 && len(r.Problems()) == 0 // dup.yaml's "a" takes over
	})
}

// TestPathsFollowFiles: the sorted paths a rebuild walks follow files
// added, rewritten and removed, and the first file in path order keeps an
// object defined twice.
func TestPathsFollowFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "b.yaml"), svc("web", 1))
	write(t, filepath.Join(dir, "d.yaml"), svc("db", 2))
	r := New(dir, slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	check := func(want ...string) {
		t.Helper()
		var got []string
		for _, p := range r.paths {
			got = append(got, filepath.Base(p))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") || len(r.paths) != len(r.files) {
			t.Errorf("paths %v (%d files), want %v", got, len(r.files), want)
		}
	}
	check("b.yaml", "d.yaml")
	write(t, filepath.Join(dir, "a.yaml"), svc("web", 3)) // web again, first in order
	write(t, filepath.Join(dir, "c.yaml"), svc("cache", 4))
	if !r.rescan() {
		t.Fatal("rescan saw no change")
	}
	check("a.yaml", "b.yaml", "c.yaml", "d.yaml")
	if ps := r.Problems(); len(ps) != 1 || !strings.Contains(ps[0].Error(), "b.yaml") {
		t.Errorf("problems %v, want b.yaml's web as the duplicate", ps)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "c.yaml"), svc("cache", 5))
	if !r.rescan() {
		t.Fatal("rescan saw no change")
	}
	check("b.yaml", "c.yaml", "d.yaml")
	if ps := r.Problems(); len(ps) != 0 {
		t.Errorf("problems %v after the duplicate went", ps)
	}
}
