package istiod

import (
	"encoding/json"
	"net/http"

	"github.com/skiff-mesh/skiff/pkg/version"
)

// serveVersion answers GET /version on the monitoring port, where Istio's
// istioctl version reads a control plane's version: the JSON of
// "pilot-discovery version -o json". Its version is IstioVersion, the
// release whose interfaces istiod serves (as in its xDS identifiers), and
// its tag Skiff's own build.
func serveVersion(w http.ResponseWriter, _ *http.Request) {
	in := version.Get()
	in.Version = IstioVersion
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]version.Info{"clientVersion": in})
}
