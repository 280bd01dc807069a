package memory

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/clocktest"
)

// fakeClock hands the Releaser timers the test fires, and a time the test sets.
type fakeClock struct {
	*clocktest.Clock
	asked chan timer
}

// timer is one After call: its duration, and the channel that fires it.
type timer struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{Clock: clocktest.New(time.Unix(1000, 0)), asked: make(chan timer)}
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	tm := timer{d, make(chan time.Time, 1)}
	c.asked <- tm
	return tm.ch
}

// TestReleaserSettlesAndRateLimits: updates in a burst share one release
// after Settle; an update soon after a release waits for MinInterval.
func TestReleaserSettlesAndRateLimits(t *testing.T) {
	clk := newFakeClock()
	released := make(chan struct{})
	r := NewReleaser(ReleaserOptions{Settle: time.Second, MinInterval: 30 * time.Second, IdleCheck: -1, After: clk.After, Now: clk.Now,
		Release: func() { released <- struct{}{} }}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	want := func(d time.Duration) chan time.Time {
		t.Helper()
		got := <-clk.asked
		if got.d != d {
			t.Fatalf("timer of %s, want %s", got.d, d)
		}
		return got.ch
	}
	r.Updated() // the NameTable
	first := want(time.Second)
	r.Updated() // the clusters, within Settle: the wait starts again
	second := want(time.Second)
	first <- clk.Now() // no longer waited on
	second <- clk.Now()
	<-released

	clk.Advance(5 * time.Second)
	r.Updated()
	fire := want(25 * time.Second) // 30 s since the release
	clk.Advance(25 * time.Second)
	fire <- clk.Now()
	<-released

	clk.Advance(time.Minute)
	r.Updated()
	want(time.Second) <- clk.Now() // long after the last release: only Settle
	<-released
}

// TestReleaserFreesTheHeap runs the real release (debug.FreeOSMemory) after
// garbage the size of a table rebuild and checks the runtime gave pages back.
// TestReleaserAfterABusySpell: an idle check releases when no collection
// ran since the last check and the runtime keeps IdleFree or more of free
// heap; not while collections run (busy), nor when little is free.
func TestReleaserAfterABusySpell(t *testing.T) {
	clk := newFakeClock()
	released := make(chan struct{}, 4)
	var mu sync.Mutex
	now := stats{cycles: 10}
	set := func(s stats) { mu.Lock(); now = s; mu.Unlock() }
	r := NewReleaser(ReleaserOptions{IdleCheck: time.Minute, IdleFree: 4 << 20, After: clk.After, Now: clk.Now,
		Release: func() { released <- struct{}{}; set(stats{cycles: 13}) }}, slog.New(slog.DiscardHandler))
	r.read = func() stats { mu.Lock(); defer mu.Unlock(); return now }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	check := func(s stats) {
		t.Helper()
		tm := <-clk.asked
		if tm.d != time.Minute {
			t.Fatalf("idle check timer of %s, want 1m", tm.d)
		}
		set(s)
		tm.ch <- clk.Now()
	}
	check(stats{cycles: 12, free: 10 << 20}) // busy: two collections in the minute
	check(stats{cycles: 12, free: 10 << 20}) // quiet since: release
	check(stats{cycles: 13, free: 1 << 20})  // quiet, little free
	check(stats{cycles: 13, free: 1 << 20})
	<-clk.asked // the next check is due: every check before it is done
	if n := len(released); n != 1 {
		t.Errorf("%d releases, want 1 (after the busy spell only)", n)
	}
}

// TestUpdatedNeverBlocks: with no Run taking them, updates coalesce.
func TestUpdatedNeverBlocks(t *testing.T) {
	r := NewReleaser(ReleaserOptions{}, slog.New(slog.DiscardHandler))
	for range 3 {
		r.Updated()
	}
	if len(r.updated) != 1 {
		t.Errorf("%d updates pending, want 1", len(r.updated))
	}
}

func TestReleaserFreesTheHeap(t *testing.T) {
	var stats runtime.MemStats
	released := make(chan uint64, 1)
	r := NewReleaser(ReleaserOptions{Settle: time.Millisecond}, slog.New(slog.DiscardHandler))
	inner := r.opts.Release
	r.opts.Release = func() {
		inner()
		runtime.ReadMemStats(&stats)
		released <- stats.HeapReleased
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	garbage := make([][]byte, 0, 256)
	for range 256 {
		garbage = append(garbage, make([]byte, 64<<10)) // 16 MB in all
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.ReadMemStats(&stats)
	before := stats.HeapReleased
	r.Updated()
	if after := <-released; after < before+8<<20 {
		t.Errorf("heap released %d -> %d bytes: under 8 MB of 16 MB garbage given back", before, after)
	}
}

// TestReleaseEmptiesPools: what a sync.Pool holds survives one collection
// (its victim cache), so a release that only ran debug.FreeOSMemory would
// keep pooled buffers; releaseAll frees them.
func TestReleaseEmptiesPools(t *testing.T) {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var pool sync.Pool
	// No collection but the release's: one would age the pool early.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 32 {
		b := make([]byte, 1<<20)
		b[0] = 1
		pool.Put(&b)
	}
	before := heap()
	releaseAll()
	after := heap()
	if before < 32<<20 || after > before-24<<20 {
		t.Errorf("heap %d MiB with the pool full, %d MiB after the release: the pooled 32 MiB stayed", before>>20, after>>20)
	}
	runtime.KeepAlive(&pool)
}
