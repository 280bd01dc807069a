// Package config is pilot-agent's configuration: Istio's ProxyConfig (from
// PROXY_CONFIG and its defaults) and the environment variables the agent
// reads, typed and validated once at start-up.
package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Well-known paths, relative to the agent's working directory as Istio's are.
const (
	XDSSocket      = "./etc/istio/proxy/XDS"
	SDSSocket      = "./var/run/secrets/workload-spiffe-uds/socket"
	TokenPath      = "./var/run/secrets/tokens/istio-token"
	RootCertPath   = "./var/run/secrets/istio/root-cert.pem"
	FileCertDir    = "./etc/certs"
	BootstrapFile  = "envoy-rev.json"
	DefaultAddress = "istiod.istio-system.svc:15012"
)

// Config is everything the agent needs.
type Config struct {
	Proxy *meshconfig.ProxyConfig
	// Type is "sidecar" or "router".
	Type string

	PodName, PodNamespace, InstanceIP, ServiceAccount string
	Cluster                                           string
	TrustDomain                                       string
	// CAAddr is where CSRs go (CA_ADDR, default: the discovery address).
	CAAddr string
	// Plaintext is true when controlPlaneAuthPolicy is NONE (xDS and CA on 15010).
	Plaintext bool

	SecretTTL        time.Duration
	GraceRatio       float64
	ECDSA            bool
	RSAKeySize       int
	FileMountedCerts bool
	OutputCerts      string

	DisableEnvoy bool
	DNSCapture   bool
	DNSProxyAddr string
	// AppProbers is ISTIO_KUBE_APP_PROBERS, parsed.
	AppProbers map[string]*Prober
	// PrometheusScrape is the app's metrics endpoint (ISTIO_PROMETHEUS_ANNOTATIONS).
	PrometheusScrape *Scrape
	// Metadata is the node metadata: ISTIO_META_* and proxyMetadata.
	Metadata map[string]string
	Labels   map[string]string
	// GRPCBootstrap is GRPC_XDS_BOOTSTRAP: write a gRPC xDS bootstrap there and run no proxy.
	GRPCBootstrap string
	TokenPath     string
	RootCertPath  string
	WorkDir       string
}

// Load builds the Config from the environment ("K=V" entries, as
// os.Environ returns them). Errors name the variable and the value.
func Load(environ []string, proxyType string) (*Config, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	get := func(k, def string) string {
		if v := vars[k]; v != "" {
			return v
		}
		return def
	}
	pc, err := ProxyConfig(get("PROXY_CONFIG", ""))
	if err != nil {
		return nil, err
	}
	// proxyMetadata entries act as environment variables for the agent.
	env := func(k, def string) string {
		if v, ok := pc.ProxyMetadata[k]; ok {
			return v
		}
		return get(k, def)
	}
	c := &Config{
		Proxy: pc, Type: proxyType,
		PodName: env("POD_NAME", ""), PodNamespace: env("POD_NAMESPACE", "default"),
		InstanceIP: env("INSTANCE_IP", ""), ServiceAccount: env("SERVICE_ACCOUNT", "default"),
		Cluster: env("ISTIO_META_CLUSTER_ID", "Kubernetes"), TrustDomain: env("TRUST_DOMAIN", "cluster.local"),
		CAAddr:      env("CA_ADDR", pc.DiscoveryAddress),
		Plaintext:   pc.ControlPlaneAuthPolicy == meshconfig.AuthenticationPolicy_NONE,
		OutputCerts: env("OUTPUT_CERTS", ""), DNSProxyAddr: env("DNS_PROXY_ADDR", ""),
		GRPCBootstrap: env("GRPC_XDS_BOOTSTRAP", ""), TokenPath: TokenPath, RootCertPath: RootCertPath, WorkDir: ".",
	}
	if proxyType != "sidecar" && proxyType != "router" {
		return nil, fmt.Errorf("proxy type %q: want sidecar or router", proxyType)
	}
	if c.InstanceIP != "" && net.ParseIP(c.InstanceIP) == nil {
		return nil, fmt.Errorf("INSTANCE_IP: %q is not an IP address", c.InstanceIP)
	}
	if c.SecretTTL, err = duration("SECRET_TTL", env("SECRET_TTL", "24h")); err != nil {
		return nil, err
	}
	if c.GraceRatio, err = strconv.ParseFloat(env("SECRET_GRACE_PERIOD_RATIO", "0.5"), 64); err != nil || c.GraceRatio <= 0 || c.GraceRatio >= 1 {
		return nil, fmt.Errorf("SECRET_GRACE_PERIOD_RATIO: %q is not a ratio between 0 and 1", env("SECRET_GRACE_PERIOD_RATIO", ""))
	}
	switch alg := env("ECC_SIGNATURE_ALGORITHM", ""); alg {
	case "":
	case "ECDSA":
		c.ECDSA = true
	default:
		return nil, fmt.Errorf("ECC_SIGNATURE_ALGORITHM: %q is not supported (ECDSA)", alg)
	}
	if c.RSAKeySize, err = strconv.Atoi(env("WORKLOAD_RSA_KEY_SIZE", "2048")); err != nil || (c.RSAKeySize != 2048 && c.RSAKeySize != 3072 && c.RSAKeySize != 4096) {
		return nil, fmt.Errorf("WORKLOAD_RSA_KEY_SIZE: %q is not 2048, 3072 or 4096", env("WORKLOAD_RSA_KEY_SIZE", ""))
	}
	for name, dst := range map[string]*bool{"FILE_MOUNTED_CERTS": &c.FileMountedCerts, "DISABLE_ENVOY": &c.DisableEnvoy, "ISTIO_META_DNS_CAPTURE": &c.DNSCapture} {
		if *dst, err = boolean(name, env(name, "false")); err != nil {
			return nil, err
		}
	}
	if c.AppProbers, err = ParseProbers(env("ISTIO_KUBE_APP_PROBERS", "")); err != nil {
		return nil, err
	}
	if c.PrometheusScrape, err = parseScrape(env("ISTIO_PROMETHEUS_ANNOTATIONS", "")); err != nil {
		return nil, err
	}
	c.Metadata = map[string]string{}
	for k, v := range vars {
		if strings.HasPrefix(k, "ISTIO_META_") {
			c.Metadata[strings.TrimPrefix(k, "ISTIO_META_")] = v
		}
	}
	for k, v := range pc.ProxyMetadata {
		if strings.HasPrefix(k, "ISTIO_META_") {
			c.Metadata[strings.TrimPrefix(k, "ISTIO_META_")] = v
		}
	}
	if labels := env("ISTIO_METAJSON_LABELS", ""); labels != "" {
		if err := json.Unmarshal([]byte(labels), &c.Labels); err != nil {
			return nil, fmt.Errorf("ISTIO_METAJSON_LABELS: %q is not a JSON object of strings", labels)
		}
	}
	return c, nil
}

func duration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration", name, v)
	}
	return d, nil
}

func boolean(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean", name, v)
	}
	return b, nil
}

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

func parseScrape(s string) (*Scrape, error) {
	if s == "" {
		return nil, nil
	}
	var sc Scrape
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return nil, fmt.Errorf("ISTIO_PROMETHEUS_ANNOTATIONS: %q: %w", s, err)
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

// Path resolves one of the agent's relative paths against its working dir.
func (c *Config) Path(p string) string { return filepath.Join(c.WorkDir, p) }

// NodeID is Envoy's node id: sidecar~IP~POD.NS~NS.svc.cluster.local.
func (c *Config) NodeID() string {
	return fmt.Sprintf("%s~%s~%s.%s~%s.svc.cluster.local", c.Type, c.InstanceIP, c.PodName, c.PodNamespace, c.PodNamespace)
}

// SortedMetadataKeys returns the metadata keys in order, for stable output.
func (c *Config) SortedMetadataKeys() []string { return slices.Sorted(maps.Keys(c.Metadata)) }
