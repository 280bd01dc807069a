package analysis

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Reporter logs each new message once and keeps the current ones (for
// the debug endpoint). istiod calls Report with the messages of every push
// context; a message is logged again only after it has gone away and come
// back.
type Reporter struct {
	log *slog.Logger

	mu      sync.Mutex
	current []Message
	seen    map[string]bool
}

// NewReporter returns a Reporter logging to log (nil: discarded).
func NewReporter(log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reporter{log: log.With("component", "analysis"), seen: map[string]bool{}}
}

// Report replaces the current messages with ms, logging those not current
// before; it returns how many were new.
func (r *Reporter) Report(ms []Message) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(ms))
	n := 0
	for _, m := range ms {
		id := m.id()
		if seen[id] {
			continue
		}
		seen[id] = true
		if r.seen[id] {
			continue
		}
		n++
		lvl := slog.LevelWarn
		switch m.Level {
		case Info:
			lvl = slog.LevelInfo
		case Error:
			lvl = slog.LevelError
		}
		r.log.Log(context.Background(), lvl, m.Text, "code", m.Type.Code, "resource", m.Resource.String(), "field", m.Field)
	}
	r.seen = seen
	r.current = slices.Clone(ms)
	return n
}

// Analyze analyzes what istiod reads and reports the messages (what
// istiod runs on each new push context).
func (r *Reporter) Analyze(in *model.Inputs) int { return r.Report(Analyze(in)) }

// Messages returns the current messages.
func (r *Reporter) Messages() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.current)
}

// For returns the messages about one resource among ms.
func For(ms []Message, k model.Key) []Message {
	var out []Message
	for _, m := range ms {
		if m.Resource == k {
			out = append(out, m)
		}
	}
	return out
}
