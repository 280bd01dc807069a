package dnsproxy

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// NDSZHandler returns an http.Handler that dumps the current NameTable as
// JSON, for the status server's /debug/ndsz. Before the first table it
// answers 503.
func (s *Server) NDSZHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := s.table.Load()
		if t == nil {
			http.Error(w, "no name table received yet", http.StatusServiceUnavailable)
			return
		}
		var nt nds.NameTable
		if err := nt.Unmarshal(t.ntWire); err != nil {
			http.Error(w, "decode name table: "+err.Error(), http.StatusInternalServerError)
			return
		}
		// The JSON tags give protojson's proto field names.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&nt); err != nil {
			http.Error(w, "marshal name table: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.Bytes())
	})
}
