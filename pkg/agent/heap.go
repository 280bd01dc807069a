package agent

import (
	"context"
	"log/slog"

	"github.com/skiff-mesh/skiff/pkg/memory"
)

// heapReleaser runs a memory.Releaser until ctx ends when release is set,
// and returns its Updated (a no-op when not set). The agent calls it after
// each NameTable and cluster list (and once at start-up without DNS
// capture): an idle agent runs no GC, so without it the heap grown while
// those were built stays resident.
func heapReleaser(ctx context.Context, release bool, log *slog.Logger, run func(string, func() error)) func() {
	if !release {
		return func() {}
	}
	r := memory.NewReleaser(memory.ReleaserOptions{}, log)
	run("heap release", func() error {
		r.Run(ctx)
		return nil
	})
	return r.Updated
}
