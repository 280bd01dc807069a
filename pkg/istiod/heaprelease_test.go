package istiod_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestHeapReleasedAfterPush: with WithHeapRelease, istiod returns its heap
// once its first push has reached every connection (none here).
func TestHeapReleasedAfterPush(t *testing.T) {
	var logs logtest.Buffer
	istiodtest.StartWith(t, nil, slog.New(slog.NewTextHandler(&logs, nil)), istiod.WithHeapRelease())
	polltest.Until(t, "istiod to return its heap after the first push", func() bool {
		return strings.Contains(logs.String(), "heap returned to the OS after an update")
	})
}
