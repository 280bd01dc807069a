package xds

import (
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// Sync states of one type for one proxy, as istioctl proxy-status shows them.
const (
	StatusSynced  = "SYNCED"
	StatusStale   = "STALE"
	StatusNotSent = "NOT SENT"
	StatusError   = "ERROR"
)

// watch is the state of one type on one stream.
type watch struct {
	typeURL string
	// wildcard is set for types subscribed as a whole.
	wildcard bool
	// names are the subscribed names, sorted (empty with wildcard).
	names []string
	// namesHash is the hash of the encoded names of the last SotW request.
	namesHash uint64
	// lastHash fingerprints the last full set sent (CDS, LDS, NDS); ""
	// forces a resend.
	lastHash string
	// sent is what a SotW client holds of EDS or RDS, sorted by name.
	sent []*gen.Resource

	nonceSent, versionSent   string
	nonceAcked, versionAcked string
	nackNonce, nackMessage   string
	sentAt                   time.Time
	// genError is why the type last failed to generate (for version
	// genVersion); "" once it generates again.
	genError, genVersion string

	// held is what a delta client holds from this stream, sorted by name.
	held []*gen.Resource
	// initial are the versions a delta client said it holds when it
	// subscribed (from a previous stream), until superseded; nil once
	// every name has been (settleInitial).
	initial map[string]string
}

// settleInitial forgets the initial versions of the names now sent (rs) or
// removed, and the map itself once it is empty. A Go map keeps its buckets
// when its entries are deleted, and a client that reconnects (every
// sidecar, when istiod restarts) brings a version for each resource it
// holds: thousands per stream, which the first response settles.
func (w *watch) settleInitial(rs []*gen.Resource, removed []string) {
	if w.initial == nil {
		return
	}
	for _, r := range rs {
		delete(w.initial, r.Name)
	}
	for _, n := range removed {
		delete(w.initial, n)
	}
	if len(w.initial) == 0 {
		w.initial = nil
	}
}

// status returns the sync state of the watch (nil: never subscribed).
func (w *watch) status() string {
	switch {
	case w == nil:
		return StatusNotSent
	case w.genError != "":
		return StatusError
	case w.nonceSent == "":
		return StatusNotSent
	case w.nackNonce != "" && w.nackNonce == w.nonceSent:
		return StatusError
	case w.nonceAcked == w.nonceSent:
		return StatusSynced
	}
	return StatusStale
}

// errorMessage is why the watch is in ERROR ("" when it is not): the type
// failed to generate, or the proxy rejected the last response.
func (w *watch) errorMessage() string {
	switch {
	case w.genError != "":
		return "generate version " + w.genVersion + ": " + w.genError
	case w.nackNonce != "" && w.nackNonce == w.nonceSent:
		return w.nackMessage
	}
	return ""
}

// TypeStatus is what syncz reports for one type of one proxy.
type TypeStatus struct {
	// Status is SYNCED, STALE, NOT SENT or ERROR.
	Status string `json:"status"`
	// Sent and Acked are the nonces last sent and last acknowledged.
	Sent  string `json:"sent,omitempty"`
	Acked string `json:"acked,omitempty"`
	// Version is the version last sent.
	Version string `json:"version,omitempty"`
	// Error is the last NACK's message, or why the type failed to
	// generate.
	Error string `json:"error,omitempty"`
	// Resources is the number of names subscribed (0 for wildcard).
	Resources int `json:"subscribed,omitempty"`
}

// ProxyStatus is one connected proxy as syncz reports it.
type ProxyStatus struct {
	// Proxy is the node id.
	Proxy string `json:"proxy"`
	// ConnectionID distinguishes streams of one proxy.
	ConnectionID string `json:"connection_id"`
	// Delta is set for delta xDS streams.
	Delta bool `json:"delta"`
	// Generator is "grpc" for proxyless clients.
	Generator string `json:"generator,omitempty"`
	// ClusterID and IstioVersion are the node's CLUSTER_ID and
	// ISTIO_VERSION metadata (named as in Istio's syncz).
	ClusterID    string `json:"cluster_id,omitempty"`
	IstioVersion string `json:"istio_version,omitempty"`
	// ConnectedAt is when the stream started.
	ConnectedAt time.Time `json:"connected_at"`
	// Types maps "CDS", "EDS", "LDS", "RDS", "NDS" to their status.
	Types map[string]TypeStatus `json:"types"`
}
