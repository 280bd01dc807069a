// Package iptablestest provides a recording iptables.Runner for unit tests.
package iptablestest

import (
	"context"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/iptables"
)

// Fake is a Runner that serves canned iptables-save output and records every
// restore transaction instead of running it.
type Fake struct {
	mu sync.Mutex
	// Saved is what Save returns per family.
	Saved map[iptables.Family]string
	// Restored records each Restore call's text, in order.
	Restored []Call
}

// Call is one recorded Restore.
type Call struct {
	Family iptables.Family
	Text   string
}

var _ iptables.Runner = (*Fake)(nil)

// Save returns the canned output for the family.
func (f *Fake) Save(_ context.Context, fam iptables.Family) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Saved[fam], nil
}

// Restore records the transaction.
func (f *Fake) Restore(_ context.Context, fam iptables.Family, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restored = append(f.Restored, Call{fam, text})
	return nil
}
