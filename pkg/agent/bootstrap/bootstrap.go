// Package bootstrap writes the proxy's start-up configuration: Envoy's
// bootstrap (node identity and metadata, ADS over the agent's xDS socket,
// SDS over its socket, the stats and readiness listeners) or, for proxyless
// gRPC, grpc-go's xDS bootstrap with certificate provider files.
package bootstrap

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
)

// Node is the proxy's identity and metadata as istiod sees it.
type Node struct {
	ID       string
	Cluster  string
	Metadata map[string]any
}

// Envoy holds what the Envoy bootstrap needs.
type Envoy struct {
	Node Node
	// XDSSocket and SDSSocket are the agent's Unix sockets.
	XDSSocket, SDSSocket string
	AdminPort            int
	StatusPort           int
	StatsPort            int // 15090
	ReadinessPort        int // 15021
	StatNameLength       int
	// Delta has Envoy's ADS use delta xDS (DELTA_GRPC), as Istio's
	// agent does by default; otherwise state of the world (GRPC).
	Delta bool
}

func pipeCluster(name, path string) map[string]any {
	return map[string]any{
		"name": name, "type": "STATIC", "connect_timeout": "1s",
		"load_assignment": map[string]any{"cluster_name": name, "endpoints": []any{map[string]any{"lb_endpoints": []any{
			map[string]any{"endpoint": map[string]any{"address": map[string]any{"pipe": map[string]any{"path": path}}}}}}}},
		"typed_extension_protocol_options": map[string]any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
			"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
			"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}}}},
	}
}

func localCluster(name string, port int) map[string]any {
	return map[string]any{
		"name": name, "type": "STATIC", "connect_timeout": "1s",
		"load_assignment": map[string]any{"cluster_name": name, "endpoints": []any{map[string]any{"lb_endpoints": []any{
			map[string]any{"endpoint": map[string]any{"address": socket("127.0.0.1", port)}}}}}},
	}
}

func socket(addr string, port int) map[string]any {
	return map[string]any{"socket_address": map[string]any{"protocol": "TCP", "address": addr, "port_value": port}}
}

// pathListener routes one exact path on a port to a local cluster.
func pathListener(name string, port int, path, cluster, rewrite string) map[string]any {
	route := map[string]any{"cluster": cluster}
	if rewrite != "" {
		route["prefix_rewrite"] = rewrite
	}
	return map[string]any{
		"name": name, "address": socket("0.0.0.0", port),
		"filter_chains": []any{map[string]any{"filters": []any{map[string]any{
			"name": "envoy.filters.network.http_connection_manager",
			"typed_config": map[string]any{
				"@type":       "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
				"stat_prefix": name, "codec_type": "AUTO",
				"route_config": map[string]any{"virtual_hosts": []any{map[string]any{
					"name": "backend", "domains": []any{"*"},
					"routes": []any{map[string]any{"match": map[string]any{"prefix": path}, "route": route}}}}},
				"http_filters": []any{map[string]any{"name": "envoy.filters.http.router", "typed_config": map[string]any{
					"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}},
			}}}}},
	}
}

// JSON renders the Envoy bootstrap.
func (e *Envoy) JSON() ([]byte, error) {
	ads := map[string]any{"ads": map[string]any{}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"}
	apiType := "GRPC"
	if e.Delta {
		apiType = "DELTA_GRPC"
	}
	b := map[string]any{
		"node": map[string]any{"id": e.Node.ID, "cluster": e.Node.Cluster, "metadata": e.Node.Metadata},
		"admin": map[string]any{
			"access_log": []any{map[string]any{"name": "envoy.access_loggers.file", "typed_config": map[string]any{
				"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/dev/null"}}},
			"address": socket("127.0.0.1", e.AdminPort),
		},
		"dynamic_resources": map[string]any{
			"lds_config": ads, "cds_config": ads,
			"ads_config": map[string]any{"api_type": apiType, "set_node_on_first_message_only": true, "transport_api_version": "V3",
				"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "xds-grpc"}}}},
		},
		"static_resources": map[string]any{
			"clusters": []any{
				pipeCluster("xds-grpc", e.XDSSocket),
				pipeCluster("sds-grpc", e.SDSSocket),
				localCluster("prometheus_stats", e.AdminPort),
				localCluster("agent", e.StatusPort),
			},
			"listeners": []any{
				pathListener("stats", e.StatsPort, "/stats/prometheus", "prometheus_stats", ""),
				pathListener("readiness", e.ReadinessPort, "/healthz/ready", "agent", ""),
			},
		},
	}
	if e.StatNameLength > 0 {
		b["stats_config"] = map[string]any{"use_all_default_tags": false}
	}
	return json.MarshalIndent(b, "", "  ")
}

// GRPC holds what grpc-go's xDS bootstrap needs.
type GRPC struct {
	Node Node
	// ServerURI is the xDS server: the agent's socket as "unix:///path", or istiod.
	ServerURI string
	// CertDir holds cert-chain.pem, key.pem and root-cert.pem (OUTPUT_CERTS).
	CertDir string
	// Plaintext connects to ServerURI without TLS.
	Plaintext bool
}

// GRPCCertFiles are the files in CertDir the gRPC bootstrap names: the
// chain, the key and the root, as the agent writes them (OUTPUT_CERTS).
func GRPCCertFiles() [3]string { return [3]string{"cert-chain.pem", "key.pem", "root-cert.pem"} }

// JSON renders the gRPC xDS bootstrap (GRPC_XDS_BOOTSTRAP).
func (g *GRPC) JSON() ([]byte, error) {
	files := GRPCCertFiles()
	creds := []any{map[string]any{"type": "insecure"}}
	if !g.Plaintext && !strings.HasPrefix(g.ServerURI, "unix:") {
		creds = []any{map[string]any{"type": "tls", "config": map[string]any{
			"ca_certificate_file": filepath.Join(g.CertDir, "root-cert.pem")}}}
	}
	meta := maps.Clone(g.Node.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["GENERATOR"] = "grpc"
	b := map[string]any{
		"xds_servers": []any{map[string]any{"server_uri": g.ServerURI, "channel_creds": creds, "server_features": []any{"xds_v3"}}},
		"node":        map[string]any{"id": g.Node.ID, "cluster": g.Node.Cluster, "metadata": meta, "locality": map[string]any{}},
		"certificate_providers": map[string]any{"default": map[string]any{"plugin_name": "file_watcher", "config": map[string]any{
			"certificate_file":    filepath.Join(g.CertDir, files[0]),
			"private_key_file":    filepath.Join(g.CertDir, files[1]),
			"ca_certificate_file": filepath.Join(g.CertDir, files[2]),
			"refresh_interval":    "900s"}}},
		"server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
	}
	return json.MarshalIndent(b, "", "  ")
}

// Write writes data to path atomically (temp file and rename), creating the directory.
func Write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	return nil
}
