package polltest

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Until(t, "three increments", func() bool { return n.Load() == 3 })
}

// recorder is a testing.TB that records Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
}

func TestWithinFailsAfterTimeout(t *testing.T) {
	r := &recorder{TB: t}
	Within(r, 30*time.Millisecond, "never", func() bool { return r.failed != "" })
	if r.failed == "" {
		t.Fatal("Within did not fail")
	}
}
