// Package logtest is a log sink for tests: a buffer that the goroutines of
// a running component may write to while the test reads it.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it; safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
