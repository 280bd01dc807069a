// Package config is pilot-agent's configuration: Istio's ProxyConfig (from
// PROXY_CONFIG and its defaults) and the environment variables the agent
// reads, typed and validated once at start-up.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Well-known paths, relative to the agent's working directory as Istio's are.
const (
	XDSSocket = "./etc/istio/proxy/XDS"
	SDSSocket = "./var/run/secrets/workload-spiffe-uds/socket"
	// EnvoyStatusPort and EnvoyPrometheusPort are Istio's readiness and
	// merged-metrics ports, as its agent reports them to istiod.
	EnvoyStatusPort     = 15021
	EnvoyPrometheusPort = 15090
	// IstioVersion is the Istio release whose interfaces Skiff implements;
	// the agent reports it to istiod as ISTIO_VERSION (Istio's istiod gates
	// features on it and warns without it).
	IstioVersion = "1.31.0"
	TokenPath    = "./var/run/secrets/tokens/istio-token"
	RootCertPath = "./var/run/secrets/istio/root-cert.pem"
	FileCertDir  = "./etc/certs"
	// GRPCBootstrapPath is where Istio's agent writes the gRPC xDS bootstrap
	// when GRPC_XDS_BOOTSTRAP is not set.
	GRPCBootstrapPath = "./etc/istio/proxy/grpc-bootstrap.json"
	BootstrapFile     = "envoy-rev.json"
	DefaultAddress    = "istiod.istio-system.svc:15012"
)

// DefaultDNSProxyAddr is DNS_PROXY_ADDR's default, Istio's spelling: both
// loopback addresses, port 15053.
const DefaultDNSProxyAddr = "localhost:15053"

// Config is everything the agent needs.
type Config struct {
	Proxy *meshconfig.ProxyConfig
	// Type is "sidecar" or "router".
	Type string

	PodName, PodNamespace, InstanceIP string
	Cluster                           string
	// ClusterDomain is the Kubernetes cluster's DNS domain, from
	// pilot-agent's --domain (NS.svc.DOMAIN, as Istio's templates pass it);
	// empty: cluster.local.
	ClusterDomain string
	// Identity is the workload's SPIFFE ID, made of TRUST_DOMAIN (default
	// cluster.local), POD_NAMESPACE and SERVICE_ACCOUNT.
	Identity spiffe.ID
	// CAAddr is where CSRs go (CA_ADDR, default: the discovery address).
	CAAddr string
	// IstiodSAN is the name istiod's certificate must carry when it is not
	// the discovery address's host (ISTIOD_SAN: a VM dialing an IP).
	// CAServerName is the CA's: IstiodSAN unless CA_ADDR is set, as in
	// Istio (empty: the host of CAAddr).
	IstiodSAN, CAServerName string
	// Plaintext is true when controlPlaneAuthPolicy is NONE (xDS and CA on 15010).
	Plaintext bool

	SecretTTL  time.Duration
	GraceRatio float64
	// KeyType is the workload key's type: ECDSA P-256 with
	// ECC_SIGNATURE_ALGORITHM=ECDSA, else RSA of WORKLOAD_RSA_KEY_SIZE bits (2048).
	KeyType          pki.KeyType
	FileMountedCerts bool
	// OutputCerts is where key, chain and root are also written (OUTPUT_CERTS;
	// with GRPC_XDS_BOOTSTRAP it defaults to "certs" beside the bootstrap).
	OutputCerts string

	DisableEnvoy bool
	// DeltaXDS has Envoy use delta xDS (ISTIO_DELTA_XDS, default true, as
	// Istio's agent); false: state of the world.
	DeltaXDS   bool
	DNSCapture bool
	// DNSAddrs are the DNS proxy's listen addresses (DNS_PROXY_ADDR, default
	// localhost:15053: 127.0.0.1 and ::1).
	DNSAddrs []netip.AddrPort
	// DNSForwardParallel sends each forwarded query to every upstream at
	// once (DNS_FORWARD_PARALLEL).
	DNSForwardParallel bool
	// Profiling serves Go's pprof profiles on the status port to loopback
	// clients (pilot-agent's --profiling, on by default as in Istio).
	Profiling bool
	// AppProbers is ISTIO_KUBE_APP_PROBERS, parsed.
	AppProbers map[string]*Prober
	// PrometheusScrape is the app's metrics endpoint (ISTIO_PROMETHEUS_ANNOTATIONS).
	PrometheusScrape *Scrape
	// Metadata is the node metadata: ISTIO_META_* and proxyMetadata.
	Metadata map[string]string
	// Labels are ISTIO_METAJSON_LABELS and, over them, the pod's labels
	// file (ReadPodInfo); Annotations are the pod's annotations file.
	Labels, Annotations map[string]string
	// WorkloadIdentitySocket is WORKLOAD_IDENTITY_SOCKET_FILE, the SDS
	// socket's file name (Istio's "socket").
	WorkloadIdentitySocket string
	// GRPCBootstrap is GRPC_XDS_BOOTSTRAP: write a gRPC xDS bootstrap there and run no proxy.
	GRPCBootstrap string
	TokenPath     string
	RootCertPath  string
	WorkDir       string
}

// Load builds the Config from the environment ("K=V" entries, as
// os.Environ returns them); PROXY_CONFIG's proxyMetadata entries act as
// more variables and win over the environment. It is the one place the
// agent reads its variables: each is parsed and validated here, and an
// error names the variable and its value.
func Load(environ []string, proxyType string) (*Config, error) {
	if proxyType != "sidecar" && proxyType != "router" {
		return nil, fmt.Errorf("proxy type %q: want sidecar or router", proxyType)
	}
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	pc, err := ProxyConfig(vars["PROXY_CONFIG"])
	if err != nil {
		return nil, err
	}
	e := &env{vars: vars, meta: pc.ProxyMetadata}
	c := &Config{
		Proxy: pc, Type: proxyType,
		PodName: e.str("POD_NAME", ""), PodNamespace: e.str("POD_NAMESPACE", "default"),
		InstanceIP: e.str("INSTANCE_IP", ""),
		Cluster:    e.str("ISTIO_META_CLUSTER_ID", "Kubernetes"),
		CAAddr:     e.str("CA_ADDR", pc.DiscoveryAddress),
		Plaintext:  pc.ControlPlaneAuthPolicy == meshconfig.AuthenticationPolicy_NONE,

		SecretTTL:        e.duration("SECRET_TTL", "24h"),
		GraceRatio:       e.ratio("SECRET_GRACE_PERIOD_RATIO", "0.5"),
		KeyType:          e.keyType("ECC_SIGNATURE_ALGORITHM", "WORKLOAD_RSA_KEY_SIZE"),
		FileMountedCerts: e.boolean("FILE_MOUNTED_CERTS"),
		OutputCerts:      e.str("OUTPUT_CERTS", ""),

		DisableEnvoy:       e.boolean("DISABLE_ENVOY"),
		DeltaXDS:           e.booleanOr("ISTIO_DELTA_XDS", true),
		DNSCapture:         e.boolean("ISTIO_META_DNS_CAPTURE"),
		DNSAddrs:           e.dnsAddrs("DNS_PROXY_ADDR", DefaultDNSProxyAddr),
		DNSForwardParallel: e.boolean("DNS_FORWARD_PARALLEL"),
		AppProbers:         e.probers("ISTIO_KUBE_APP_PROBERS"),
		PrometheusScrape:   e.scrape("ISTIO_PROMETHEUS_ANNOTATIONS"),
		Labels:             e.labels("ISTIO_METAJSON_LABELS"),

		WorkloadIdentitySocket: e.str("WORKLOAD_IDENTITY_SOCKET_FILE", "socket"),

		GRPCBootstrap: e.str("GRPC_XDS_BOOTSTRAP", ""),
		TokenPath:     TokenPath, RootCertPath: RootCertPath, WorkDir: ".",
	}
	if c.InstanceIP != "" {
		if _, err := netip.ParseAddr(c.InstanceIP); err != nil {
			e.fail("INSTANCE_IP", c.InstanceIP, "not an IP address")
		}
	}
	if w := c.WorkloadIdentitySocket; w == "" || w != filepath.Base(w) || w == "." || w == ".." {
		e.fail("WORKLOAD_IDENTITY_SOCKET_FILE", w, "must be a file name, not a path")
	}
	c.Identity = e.identity("TRUST_DOMAIN", c.PodNamespace, "SERVICE_ACCOUNT")
	if c.IstiodSAN = e.str("ISTIOD_SAN", ""); e.str("CA_ADDR", "") == "" {
		c.CAServerName = c.IstiodSAN
	}
	switch {
	case c.GRPCBootstrap != "" && c.OutputCerts == "":
		c.OutputCerts = filepath.Join(filepath.Dir(c.GRPCBootstrap), "certs")
	case c.GRPCBootstrap == "" && c.DisableEnvoy && c.OutputCerts != "":
		// Istio's grpc-agent template: no Envoy, certificates written out,
		// and the app reads the bootstrap from Istio's default path.
		c.GRPCBootstrap = GRPCBootstrapPath
	}
	if err := errors.Join(e.errs...); err != nil {
		return nil, err
	}
	c.Metadata = map[string]string{}
	for _, src := range []map[string]string{vars, pc.ProxyMetadata} {
		for k, v := range src {
			if name, ok := strings.CutPrefix(k, "ISTIO_META_"); ok {
				c.Metadata[name] = v
			}
		}
	}
	return c, nil
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

// SDSSocketPath is the SDS socket, relative like SDSSocket, with
// WORKLOAD_IDENTITY_SOCKET_FILE as its file name.
func (c *Config) SDSSocketPath() string {
	return filepath.Join(filepath.Dir(SDSSocket), c.WorkloadIdentitySocket)
}

// Path resolves one of the agent's relative paths against its working dir;
// an absolute path stays as it is.
func (c *Config) Path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.WorkDir, p)
}

// NodeID is Envoy's node id: sidecar~IP~POD.NS~NS.svc.cluster.local.
func (c *Config) NodeID() string {
	return fmt.Sprintf("%s~%s~%s.%s~%s.svc.cluster.local", c.Type, c.InstanceIP, c.PodName, c.PodNamespace, c.PodNamespace)
}

// SortedMetadataKeys returns the metadata keys in order, for stable output.
func (c *Config) SortedMetadataKeys() []string { return slices.Sorted(maps.Keys(c.Metadata)) }
