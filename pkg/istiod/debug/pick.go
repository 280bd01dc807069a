package debug

import (
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// pick chooses the stream config_dump answers for among a proxy's streams.
// A pod's agent may open a stream of its own under the pod's node id (for
// the NameTable, and clusters for SRV answers) beside the app's: always
// beside a proxyless gRPC client's, and beside Envoy's for a moment while it
// moves the NameTable onto Envoy's stream. The dump is of the app's stream,
// so pick prefers, in order: a stream without the NameTable (a gRPC client
// never asks for it), the one with the most types subscribed, the
// newest (a reconnected proxy's old stream may linger). id is a whole node
// id or, as Istio accepts, its proxy ID (POD.NS). Nil when none has id.
func pick(conns []*xds.Connection, id string) *xds.Connection {
	type cand struct {
		c       *xds.Connection
		agent   bool
		watched int
	}
	var cands []cand
	for _, c := range conns {
		if nid := c.Proxy().ID; nid != id && proxyID(nid) != id {
			continue
		}
		w := c.Watched()
		cands = append(cands, cand{c: c, agent: slices.Contains(w, gen.NameTableType), watched: len(w)})
	}
	if len(cands) == 0 {
		return nil
	}
	best := slices.MinFunc(cands, func(a, b cand) int {
		switch {
		case a.agent != b.agent:
			if b.agent {
				return -1
			}
			return 1
		case a.watched != b.watched:
			return b.watched - a.watched
		}
		return b.c.ConnectedAt().Compare(a.c.ConnectedAt())
	})
	return best.c
}

// proxyID is the third field of a node id (TYPE~IP~POD.NS~DOMAIN), or "".
func proxyID(nodeID string) string {
	parts := strings.Split(nodeID, "~")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}
