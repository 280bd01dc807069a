package proxyview

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Type URLs of Istio's syncz, by the short names of the status table.
var istioTypes = []struct{ short, url string }{
	{"CDS", "type.googleapis.com/envoy.config.cluster.v3.Cluster"},
	{"LDS", "type.googleapis.com/envoy.config.listener.v3.Listener"},
	{"EDS", "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"},
	{"RDS", "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"},
	{"ECDS", "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"},
	{"NDS", "type.googleapis.com/istio.networking.nds.v1.NameTable"},
}

// synczEntry holds one element of /debug/syncz in either istiod's format:
// Skiff's (proxy, types) or Istio's SyncStatus (proxy, cluster_id,
// istio_version, per-type sent and acked nonces, resources by type URL).
type synczEntry struct {
	Proxy        string                `json:"proxy"`
	Generator    string                `json:"generator"`
	Types        map[string]TypeStatus `json:"types"`
	ClusterID    string                `json:"cluster_id"`
	IstioVersion string                `json:"istio_version"`

	ProxyType            string                        `json:"proxy_type"`
	ClusterSent          string                        `json:"cluster_sent"`
	ClusterAcked         string                        `json:"cluster_acked"`
	ListenerSent         string                        `json:"listener_sent"`
	ListenerAcked        string                        `json:"listener_acked"`
	RouteSent            string                        `json:"route_sent"`
	RouteAcked           string                        `json:"route_acked"`
	EndpointSent         string                        `json:"endpoint_sent"`
	EndpointAcked        string                        `json:"endpoint_acked"`
	ExtensionConfigSent  string                        `json:"extensionconfig_sent"`
	ExtensionConfigAcked string                        `json:"extensionconfig_acked"`
	Resources            map[string]istioResourceState `json:"resources"`
}

// istioResourceState is Istio's per-type ResourceStatus.
type istioResourceState struct {
	Sent      string `json:"sent"`
	Acked     string `json:"acked"`
	LastError string `json:"lastError"`
}

// isIstio reports whether the entry has any of Istio's SyncStatus fields.
func (e *synczEntry) isIstio() bool {
	return e.Resources != nil || e.ProxyType != "" || e.ClusterSent != "" || e.ListenerSent != "" ||
		e.RouteSent != "" || e.EndpointSent != "" || e.ExtensionConfigSent != ""
}

// flat returns Istio's older per-type fields for a short name.
func (e *synczEntry) flat(short string) istioResourceState {
	switch short {
	case "CDS":
		return istioResourceState{Sent: e.ClusterSent, Acked: e.ClusterAcked}
	case "LDS":
		return istioResourceState{Sent: e.ListenerSent, Acked: e.ListenerAcked}
	case "RDS":
		return istioResourceState{Sent: e.RouteSent, Acked: e.RouteAcked}
	case "EDS":
		return istioResourceState{Sent: e.EndpointSent, Acked: e.EndpointAcked}
	case "ECDS":
		return istioResourceState{Sent: e.ExtensionConfigSent, Acked: e.ExtensionConfigAcked}
	}
	return istioResourceState{}
}

// istioStatus derives a type's state from nonces as Istio's istiod does:
// an error wins, nothing sent is NOT SENT, the last sent acknowledged is
// SYNCED, else STALE.
func istioStatus(r istioResourceState) TypeStatus {
	switch {
	case r.LastError != "":
		return TypeStatus{Status: "ERROR", Error: r.LastError}
	case r.Sent == "":
		return TypeStatus{Status: "NOT SENT"}
	case r.Acked == r.Sent:
		return TypeStatus{Status: "SYNCED"}
	}
	return TypeStatus{Status: "STALE"}
}

// ErrSynczFormat says /debug/syncz answered in neither known format.
var ErrSynczFormat = errors.New("unknown /debug/syncz format")

// ParseSyncz reads /debug/syncz from Skiff's istiod or Istio's. Entries in
// neither format are an error: guessing would print states nobody reported.
func ParseSyncz(body []byte) ([]ProxyStatus, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("%w: want a JSON list: %v", ErrSynczFormat, err)
	}
	out := make([]ProxyStatus, 0, len(raws))
	for i, raw := range raws {
		var e synczEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrSynczFormat, i, err)
		}
		if e.Proxy == "" {
			return nil, fmt.Errorf("%w: entry %d has no proxy id", ErrSynczFormat, i)
		}
		ps := ProxyStatus{Proxy: e.Proxy, Generator: e.Generator, ClusterID: e.ClusterID, IstioVersion: e.IstioVersion}
		switch {
		case e.Types != nil:
			ps.Types = e.Types
		case e.isIstio():
			ps.Types = map[string]TypeStatus{}
			for _, t := range istioTypes {
				r, ok := e.Resources[t.url]
				if !ok {
					r = e.flat(t.short)
				}
				if ok || r.Sent != "" {
					ps.Types[t.short] = istioStatus(r)
				}
			}
		default:
			return nil, fmt.Errorf("%w: entry %d (proxy %s) has neither types (Skiff) nor resources or *_sent nonces (Istio)", ErrSynczFormat, i, e.Proxy)
		}
		out = append(out, ps)
	}
	return out, nil
}
