// Package debug serves istiod's debug endpoints (port 8080 in Istio):
// /debug/syncz, /debug/configz, /debug/config_dump?proxyID= and
// /debug/pprof/.
package debug

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// Handler returns the debug mux.
func Handler(x *xds.Server, reg registry.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/syncz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, x.Status())
	})
	mux.HandleFunc("GET /debug/configz", func(w http.ResponseWriter, _ *http.Request) {
		var problems []string
		for _, p := range reg.Problems() {
			problems = append(problems, p.Error())
		}
		version := ""
		if pc := x.PushContext(); pc != nil {
			version = pc.Version
		}
		writeJSON(w, map[string]any{"version": version, "problems": problems, "objects": reg.Inputs()})
	})
	mux.HandleFunc("GET /debug/config_dump", func(w http.ResponseWriter, r *http.Request) {
		configDump(w, r, x)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// configDump writes what istiod would send a connected proxy now, by type:
// for the app's stream when the proxy's agent has one of its own (pick).
func configDump(w http.ResponseWriter, r *http.Request, x *xds.Server) {
	id := r.URL.Query().Get("proxyID")
	if id == "" {
		http.Error(w, "proxyID query parameter required", http.StatusBadRequest)
		return
	}
	conn := pick(x.Connections(), id)
	pc := x.PushContext()
	if conn == nil || pc == nil {
		http.Error(w, fmt.Sprintf("proxy %q is not connected", id), http.StatusNotFound)
		return
	}
	out := map[string][]json.RawMessage{}
	for _, typ := range gen.PushOrder() {
		rs, err := gen.Generate(pc, conn.Proxy(), typ, conn.Subscribed(typ))
		if err != nil {
			continue
		}
		for _, res := range rs {
			b, err := resourceJSON(res)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out[gen.ShortName(typ)] = append(out[gen.ShortName(typ)], b)
		}
	}
	writeJSON(w, map[string]any{"proxy": id, "connection_id": conn.ID(), "version": pc.Version, "config": out})
}

// resourceJSON renders a resource with protojson; a NameTable, plain Go
// and not a registered protobuf type, with encoding/json.
func resourceJSON(res *gen.Resource) ([]byte, error) {
	if res.Any.GetTypeUrl() == nds.TypeURL {
		var nt nds.NameTable
		if err := nt.Unmarshal(res.Any.GetValue()); err != nil {
			return nil, err
		}
		return json.Marshal(&nt)
	}
	m, err := res.Any.UnmarshalNew()
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(m)
}
