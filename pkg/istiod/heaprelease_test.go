package istiod_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// syncBuffer is a log sink safe for the goroutines of a running istiod.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeapReleasedAfterPush: with WithHeapRelease, istiod returns its heap
// once its first push has reached every connection (none here).
func TestHeapReleasedAfterPush(t *testing.T) {
	var logs syncBuffer
	istiodtest.StartWith(t, nil, slog.New(slog.NewTextHandler(&logs, nil)), istiod.WithHeapRelease())
	polltest.Until(t, "istiod to return its heap after the first push", func() bool {
		return strings.Contains(logs.String(), "heap returned to the OS after an update")
	})
}
