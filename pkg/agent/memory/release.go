package memory

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Releaser returns the heap to the OS once an update is in place: a full
// collection and the free pages given back (debug.FreeOSMemory). Updates
// that come together (the NameTable, then the clusters) share one release,
// Settle after the last of them, and releases are at least MinInterval
// apart, so a control plane pushing often costs at most one collection per
// MinInterval.
type Releaser struct {
	opts    ReleaserOptions
	log     *slog.Logger
	updated chan struct{}
}

// ReleaserOptions configure a Releaser.
type ReleaserOptions struct {
	// Settle is how long no update must come before the release (1 s).
	Settle time.Duration
	// MinInterval is the least time between two releases (30 s).
	MinInterval time.Duration
	// Release frees the memory (debug.FreeOSMemory); a seam for tests.
	Release func()
	// After is time.After; a seam for tests.
	After func(time.Duration) <-chan time.Time
	// Now is time.Now; a seam for tests.
	Now func() time.Time
}

// NewReleaser returns a Releaser; Run it.
func NewReleaser(opts ReleaserOptions, log *slog.Logger) *Releaser {
	if opts.Settle <= 0 {
		opts.Settle = time.Second
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = 30 * time.Second
	}
	if opts.Release == nil {
		opts.Release = debug.FreeOSMemory
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Releaser{opts: opts, log: log.With("component", "memory"), updated: make(chan struct{}, 1)}
}

// Updated tells the Releaser a big update is in place. It never blocks.
func (r *Releaser) Updated() {
	select {
	case r.updated <- struct{}{}:
	default: // one is pending already
	}
}

// Run releases after updates until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.updated:
		}
		// Wait until the updates settle, and until MinInterval has passed
		// since the last release.
		for wait := r.opts.Settle; ; {
			if !last.IsZero() {
				wait = max(wait, r.opts.MinInterval-r.opts.Now().Sub(last))
			}
			select {
			case <-ctx.Done():
				return
			case <-r.updated:
				wait = r.opts.Settle
				continue
			case <-r.opts.After(wait):
			}
			break
		}
		last = r.release()
	}
}

func (r *Releaser) release() time.Time {
	before := sample()
	start := r.opts.Now()
	r.opts.Release()
	took := r.opts.Now().Sub(start)
	after := sample()
	r.log.Info("heap returned to the OS after an update", "took", took.Round(time.Microsecond),
		"cpu", time.Duration((after.cpu-before.cpu)*float64(time.Second)).Round(time.Microsecond),
		"heap_live_bytes", after.live, "released_bytes", int64(after.released)-int64(before.released))
	return start
}

// stats are the runtime's figures a release changes.
type stats struct {
	cpu            float64 // GC and scavenger CPU seconds, the runtime's estimate
	live, released uint64
}

var statNames = []string{"/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/scavenge/total:cpu-seconds",
	"/gc/heap/live:bytes", "/memory/classes/heap/released:bytes"}

func sample() stats {
	ss := make([]metrics.Sample, len(statNames))
	for i, n := range statNames {
		ss[i].Name = n
	}
	metrics.Read(ss)
	f := func(i int) float64 {
		if ss[i].Value.Kind() == metrics.KindFloat64 {
			return ss[i].Value.Float64()
		}
		return 0
	}
	u := func(i int) uint64 {
		if ss[i].Value.Kind() == metrics.KindUint64 {
			return ss[i].Value.Uint64()
		}
		return 0
	}
	return stats{cpu: f(0) + f(1), live: u(2), released: u(3)}
}
