// Package clocktest is a clock for tests: a time that moves only when the
// test advances it, safe to read from the code under test's goroutines.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a settable time. Its zero value reads the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time; it has the type of time.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
