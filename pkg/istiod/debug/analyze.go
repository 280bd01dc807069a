package debug

import (
	"net/http"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
)

// AnalyzePath lists istiod's current analysis messages.
const AnalyzePath = "/debug/analyze"

// Analyze serves the current analysis messages (what istiod reported on
// its last push, see analysis.Reporter) as JSON:
// {"count": N, "messages": [{code, level, origin, field, message, ...}]}.
// ?namespace=NS keeps one namespace's, ?level=Warning those at or above a
// level.
func Analyze(messages func() []analysis.Message) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		least := analysis.Info
		if v := r.URL.Query().Get("level"); v != "" {
			l, err := analysis.ParseLevel(v)
			if err != nil {
				http.Error(w, "level: "+err.Error(), http.StatusBadRequest)
				return
			}
			least = l
		}
		ns := r.URL.Query().Get("namespace")
		out := []analysis.Message{}
		for _, m := range messages() {
			if m.Level >= least && (ns == "" || m.Resource.Namespace == ns) {
				out = append(out, m)
			}
		}
		writeJSON(w, map[string]any{"count": len(out), "messages": out})
	}
}
