package inject

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestWatchFiles(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	cfgPath, valPath := filepath.Join(dir, "config"), filepath.Join(dir, "values")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(valPath, `{"revision": "one"}`)
	cfg, err := LoadFiles(cfgPath, valPath) // config missing: the chart's
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.WatchFiles(ctx, cfgPath, valPath, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(rev string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for in.Revision() != rev {
			if time.Now().After(deadline) {
				t.Fatalf("revision %q, want %q", in.Revision(), rev)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("one")
	write(valPath, `{"revision": "two"}`)
	waitFor("two")
	write(valPath, `{"global": {"proxy": {"statusPort": "nope"}}, "revision": "three"}`) // invalid: kept
	time.Sleep(100 * time.Millisecond)
	waitFor("two")
	write(cfgPath, "policy: disabled\n")
	write(valPath, `{"revision": "four"}`)
	waitFor("four")
	if res, _ := in.Inject(appPod(), ""); res.Injected {
		t.Error("policy: disabled not applied")
	}
}
