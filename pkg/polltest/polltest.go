// Package polltest waits in tests for a condition that another goroutine or
// process makes true: the one poll loop the test suites share, so that no
// test sleeps a fixed time and then asserts.
package polltest

import (
	"testing"
	"time"
)

// Timeout is how long Until waits. It is generous on purpose: a loaded CI
// machine is slow, and a passing test returns as soon as cond holds.
const Timeout = 30 * time.Second

// interval is the time between two looks at the condition.
const interval = 10 * time.Millisecond

// Until calls cond every few milliseconds until it returns true, and fails
// the test naming what it waited for if that takes longer than Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is Until with a timeout of its own, for a caller that knows how
// long the awaited event may take at most.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Wait(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Wait polls cond for up to d and reports whether it became true, for a
// caller that explains a timeout itself (with what it saw).
func Wait(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}
