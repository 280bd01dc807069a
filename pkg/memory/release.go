package memory

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Releaser returns the heap to the OS once an update is in place: two full
// collections (so sync.Pool caches go too) and the free pages given back
// (debug.FreeOSMemory). Updates
// that come together (the NameTable, then the clusters) share one release,
// Settle after the last of them, and releases are at least MinInterval
// apart, so a control plane pushing often costs at most one collection per
// MinInterval.
//
// It also releases once a busy spell is over: when a whole IdleCheck
// passed without a collection (the agent allocates little) while the
// runtime keeps at least IdleFree bytes of free heap it grew while busy
// (and would keep: the goal of the last collection stays until the next).
type Releaser struct {
	opts    ReleaserOptions
	log     *slog.Logger
	updated chan struct{}
	read    func() stats // sample; a seam for tests
}

// ReleaserOptions configure a Releaser.
type ReleaserOptions struct {
	// Settle is how long no update must come before the release (1 s).
	Settle time.Duration
	// MinInterval is the least time between two releases (30 s).
	MinInterval time.Duration
	// IdleCheck is how often the heap is looked at for a release after a
	// busy spell (1 min); below 0, never.
	IdleCheck time.Duration
	// IdleFree is the free heap that makes an idle check release (4 MiB).
	IdleFree uint64
	// Release frees the memory (releaseAll); a seam for tests.
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
	if opts.IdleCheck == 0 {
		opts.IdleCheck = time.Minute
	}
	if opts.IdleFree == 0 {
		opts.IdleFree = 4 << 20
	}
	if opts.Release == nil {
		opts.Release = releaseAll
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Releaser{opts: opts, log: log.With("component", "memory"), updated: make(chan struct{}, 1), read: sample}
}

// Updated tells the Releaser a big update is in place. It never blocks.
func (r *Releaser) Updated() {
	select {
	case r.updated <- struct{}{}:
	default: // one is pending already
	}
}

// Run releases after updates and busy spells until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	var last time.Time
	prev := r.read()
	idle := r.idleTimer()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle:
			cur := r.read()
			if cur.cycles == prev.cycles && cur.free >= r.opts.IdleFree && r.since(last) >= r.opts.MinInterval {
				last = r.release("heap returned to the OS after a busy spell")
				cur = r.read()
			}
			prev, idle = cur, r.idleTimer()
			continue
		case <-r.updated:
		}
		// Wait until the updates settle, and until MinInterval has passed
		// since the last release.
		for wait := r.opts.Settle; ; {
			wait = max(wait, r.opts.MinInterval-r.since(last))
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
		last = r.release("heap returned to the OS after an update")
	}
}

// since is the time since t, or longer than any interval when t is zero.
func (r *Releaser) since(t time.Time) time.Duration {
	if t.IsZero() {
		return 1<<63 - 1
	}
	return r.opts.Now().Sub(t)
}

func (r *Releaser) idleTimer() <-chan time.Time {
	if r.opts.IdleCheck < 0 {
		return nil
	}
	return r.opts.After(r.opts.IdleCheck)
}

func (r *Releaser) release(msg string) time.Time {
	before := r.read()
	start := r.opts.Now()
	r.opts.Release()
	took := r.opts.Now().Sub(start)
	after := r.read()
	r.log.Info(msg, "took", took.Round(time.Microsecond),
		"cpu", time.Duration((after.cpu-before.cpu)*float64(time.Second)).Round(time.Microsecond),
		"heap_live_bytes", after.live, "released_bytes", int64(after.released)-int64(before.released))
	return start
}

// releaseAll collects twice, then gives the free pages back. What a
// sync.Pool holds survives one collection (its victim cache), so pooled
// buffers taken during a busy spell (gRPC's write buffers, the DNS
// proxy's flights) are freed by the second and released with the rest.
func releaseAll() {
	runtime.GC()
	debug.FreeOSMemory()
}

// stats are the runtime's figures a release looks at and changes.
type stats struct {
	cpu            float64 // GC and scavenger CPU seconds, the runtime's estimate
	live, released uint64
	free           uint64 // free heap the runtime keeps (not released)
	cycles         uint64 // completed GC cycles
}

var statNames = []string{"/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/scavenge/total:cpu-seconds",
	"/gc/heap/live:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes", "/gc/cycles/total:gc-cycles"}

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
	return stats{cpu: f(0) + f(1), live: u(2), released: u(3), free: u(4), cycles: u(5)}
}
