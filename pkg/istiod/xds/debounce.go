package xds

import (
	"context"
	"sync"
	"time"
)

// Debounce settings (Istio's PILOT_DEBOUNCE_AFTER and PILOT_DEBOUNCE_MAX).
type Debounce struct {
	// After is the quiet period that ends a burst (default 100ms).
	After time.Duration
	// Max bounds the wait from the first event of a burst (default 10s).
	Max time.Duration
}

// Debouncer merges notifications: fire runs once per burst, after After of
// quiet or Max after the burst began, and never twice at once.
//
// Lead lets a change that is cheap to push (an endpoint change) skip the
// wait when nothing is pending and nothing was pushed for After: the first
// change after a quiet spell goes at once, and the rest of its burst is
// debounced as before. That is the "push immediately, then debounce" of
// Istio issue 24021. Pushes stay at most one per After of quiet, plus the
// one each burst ends with.
type Debouncer struct {
	cfg  Debounce
	ch   chan struct{}
	fire func(first time.Time)
	now  func() time.Time

	mu       sync.Mutex
	bursting bool      // Run holds a burst not yet fired
	leading  bool      // Lead is pushing
	last     time.Time // when the last push ended
}

// NewDebouncer returns a debouncer calling fire with the time of the
// burst's first event.
func NewDebouncer(cfg Debounce, fire func(first time.Time)) *Debouncer {
	if cfg.After <= 0 {
		cfg.After = 100 * time.Millisecond
	}
	if cfg.Max <= 0 {
		cfg.Max = 10 * time.Second
	}
	return &Debouncer{cfg: cfg, ch: make(chan struct{}, 1), fire: fire, now: time.Now}
}

// Notify records a change; it never blocks.
func (d *Debouncer) Notify() {
	select {
	case d.ch <- struct{}{}:
	default:
	}
}

// Lead runs push at once if the debouncer is quiet: no burst pending, no
// other lead running and no push within After. push reports whether it
// handled the change; a handled change counts as a push even when it
// turned out to send nothing, so that rebuilds stay at most one per After
// however fast changes come. A change push did not handle, or that came
// when the debouncer was not quiet, is notified and waits for the debounce.
func (d *Debouncer) Lead(push func() bool) {
	d.mu.Lock()
	quiet := !d.bursting && !d.leading && len(d.ch) == 0 && d.now().Sub(d.last) >= d.cfg.After
	d.leading = quiet
	d.mu.Unlock()
	if !quiet {
		d.Notify()
		return
	}
	handled := push()
	d.mu.Lock()
	d.leading = false
	if handled {
		d.last = d.now()
	}
	d.mu.Unlock()
	if !handled {
		d.Notify()
	}
}

// Run debounces until ctx ends.
func (d *Debouncer) Run(ctx context.Context) {
	var quiet, limit *time.Timer
	var first time.Time
	var quietC, limitC <-chan time.Time
	stop := func() {
		if quiet != nil {
			quiet.Stop()
			limit.Stop()
		}
		quietC, limitC = nil, nil
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.ch:
			if quietC == nil {
				d.mu.Lock()
				d.bursting = true
				d.mu.Unlock()
				first = time.Now()
				quiet, limit = time.NewTimer(d.cfg.After), time.NewTimer(d.cfg.Max)
				quietC, limitC = quiet.C, limit.C
			} else {
				quiet.Reset(d.cfg.After)
			}
		case <-quietC:
			stop()
			d.burst(first)
		case <-limitC:
			stop()
			d.burst(first)
		}
	}
}

// burst fires a burst and marks its push.
func (d *Debouncer) burst(first time.Time) {
	d.fire(first)
	d.mu.Lock()
	d.bursting, d.last = false, d.now()
	d.mu.Unlock()
}
