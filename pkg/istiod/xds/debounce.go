package xds

import (
	"context"
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
type Debouncer struct {
	cfg  Debounce
	ch   chan struct{}
	fire func(first time.Time)
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
	return &Debouncer{cfg: cfg, ch: make(chan struct{}, 1), fire: fire}
}

// Notify records a change; it never blocks.
func (d *Debouncer) Notify() {
	select {
	case d.ch <- struct{}{}:
	default:
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
				first = time.Now()
				quiet, limit = time.NewTimer(d.cfg.After), time.NewTimer(d.cfg.Max)
				quietC, limitC = quiet.C, limit.C
			} else {
				quiet.Reset(d.cfg.After)
			}
		case <-quietC:
			stop()
			d.fire(first)
		case <-limitC:
			stop()
			d.fire(first)
		}
	}
}
