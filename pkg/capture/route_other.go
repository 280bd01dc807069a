//go:build !linux

package capture

import "errors"

var errNotLinux = errors.New("capture: routing needs Linux")

// netlinkRouting is the Routing of the calling thread's namespace; it needs Linux.
type netlinkRouting struct{}

var _ Routing = netlinkRouting{}

// Setup needs Linux.
func (netlinkRouting) Setup(*Policy) error { return errNotLinux }

// Remove needs Linux.
func (netlinkRouting) Remove(*Policy) error { return errNotLinux }
