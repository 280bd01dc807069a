package config

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// DefaultProxyConfig is Istio's ProxyConfig with nothing set.
func DefaultProxyConfig() *meshconfig.ProxyConfig {
	return &meshconfig.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		BinaryPath:               "/usr/local/bin/envoy",
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		DiscoveryAddress:         DefaultAddress,
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshconfig.AuthenticationPolicy_MUTUAL_TLS,
		StatNameLength:           189,
		StatusPort:               15020,
		ClusterName:              &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
	}
}

// ProxyConfig parses PROXY_CONFIG (JSON or YAML, Istio's field names) over the defaults.
func ProxyConfig(s string) (*meshconfig.ProxyConfig, error) {
	pc := DefaultProxyConfig()
	if strings.TrimSpace(s) == "" {
		return pc, nil
	}
	js, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: not JSON or YAML: %w", err)
	}
	var over meshconfig.ProxyConfig
	if err := protojson.Unmarshal(js, &over); err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: %w", err)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(js, &keys)
	merge(pc, &over, keys)
	if pc.StatusPort <= 0 || pc.StatusPort > 65535 {
		return nil, fmt.Errorf("PROXY_CONFIG: statusPort %d is not a port", pc.StatusPort)
	}
	if _, _, err := net.SplitHostPort(pc.DiscoveryAddress); err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: discoveryAddress %q: %w", pc.DiscoveryAddress, err)
	}
	return pc, nil
}

// merge copies the fields set in over onto pc. Enums whose zero value is
// meaningful (controlPlaneAuthPolicy NONE) are copied when the key was given.
func merge(pc, over *meshconfig.ProxyConfig, keys map[string]json.RawMessage) {
	proto.Merge(pc, over)
	for _, k := range []string{"controlPlaneAuthPolicy", "control_plane_auth_policy"} {
		if _, ok := keys[k]; ok {
			pc.ControlPlaneAuthPolicy = over.ControlPlaneAuthPolicy
		}
	}
}

// Scrape is the app's Prometheus endpoint.
type Scrape struct {
	Scrape bool   `json:"scrape,string"`
	Path   string `json:"path"`
	Port   string `json:"port"`
}

// parseScrape reads ISTIO_PROMETHEUS_ANNOTATIONS: nil unless scraping is on.
func parseScrape(s string) (*Scrape, error) {
	if s == "" {
		return nil, nil
	}
	var sc Scrape
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return nil, fmt.Errorf("not a JSON object of scrape, path and port: %w", err)
	}
	if !sc.Scrape {
		return nil, nil
	}
	if sc.Path == "" {
		sc.Path = "/metrics"
	}
	if sc.Port == "" {
		sc.Port = "80"
	}
	return &sc, nil
}
