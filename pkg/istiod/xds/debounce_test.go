package xds

import (
	"context"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/clocktest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// lead calls d.Lead with a push answering handled, and reports whether
// the push ran and whether a notification is pending afterwards.
func lead(d *Debouncer, handled bool) (ran, notified bool) {
	d.Lead(func() bool { ran = true; return handled })
	return ran, len(d.ch) == 1
}

// drain takes a pending notification, as Run would.
func drain(d *Debouncer) {
	select {
	case <-d.ch:
	default:
	}
}

func TestDebouncerLead(t *testing.T) {
	after := time.Minute
	clk := clocktest.New(time.Unix(1e9, 0))
	d := NewDebouncer(Debounce{After: after, Max: time.Hour}, func(time.Time) {})
	d.now = clk.Now

	// Each step calls Lead once, its push answering handled.
	steps := []struct {
		name          string
		before        func()
		handled       bool
		ran, notified bool
	}{
		{"first change ever goes at once", nil, true, true, false},
		{"a change within After of that push waits", nil, true, false, true},
		{"a change while one is pending waits", nil, true, false, true},
		{"a change After after the last push goes at once", func() { drain(d); clk.Advance(after) }, true, true, false},
		{"one just short of After waits", func() { drain(d); clk.Advance(after - time.Nanosecond) }, true, false, true},
		{"a change the push refuses (a full one) is notified", func() { drain(d); clk.Advance(after) }, false, true, true},
		{"a refused push is no push: the next change goes at once", func() { drain(d) }, true, true, false},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		ran, notified := lead(d, s.handled)
		if ran != s.ran || notified != s.notified {
			t.Fatalf("%s: push ran %v, notified %v; want %v, %v", s.name, ran, notified, s.ran, s.notified)
		}
	}
}

// TestDebouncerLeadAfterBurst runs the debouncer: while a burst is pending
// a change waits, and the burst's push counts as the last push.
func TestDebouncerLeadAfterBurst(t *testing.T) {
	after := 5 * time.Millisecond
	clk := clocktest.New(time.Unix(1e9, 0))
	entered, fired := make(chan struct{}, 8), make(chan struct{}, 8)
	release := make(chan struct{})
	d := NewDebouncer(Debounce{After: after, Max: time.Hour}, func(time.Time) {
		entered <- struct{}{}
		<-release
		fired <- struct{}{}
	})
	d.now = clk.Now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	d.Notify()
	<-entered // the burst is pending until fire returns; fire waits for release
	if ran, _ := lead(d, true); ran {
		t.Fatal("a change during a pending burst was pushed at once")
	}
	clk.Advance(time.Hour) // time cannot make a pending burst quiet
	close(release)
	<-fired // the first burst, then the one the refused lead notified
	<-fired
	polltest.Until(t, "no burst pending", func() bool { return !d.pending() })
	if ran, _ := lead(d, true); ran {
		t.Fatal("a change right after a burst's push was pushed at once")
	}
	<-fired
	polltest.Until(t, "no burst pending", func() bool { return !d.pending() })
	clk.Advance(after)
	if ran, notified := lead(d, true); !ran || notified {
		t.Fatalf("a change After after a burst's push: ran %v, notified %v; want it pushed at once", ran, notified)
	}
}

// pending reports whether Run holds a burst.
func (d *Debouncer) pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bursting
}
