// Package config is pilot-agent's configuration: Istio's ProxyConfig (from
// PROXY_CONFIG and its defaults) and the environment variables the agent
// reads, typed and validated once at start-up.
package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
	// SystemRoots as XDS_ROOT_CA or CA_ROOT_CA trusts the system's roots.
	SystemRoots = "SYSTEM"
	FileCertDir = "./etc/certs"
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
	Proxy *ProxyConfig
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
	// GraceJitter moves GraceRatio up or down by up to this much at each
	// rotation, so pods started together renew apart
	// (SECRET_GRACE_PERIOD_RATIO_JITTER, default 0.01).
	GraceJitter float64
	// KeyType is the workload key's type: ECDSA with
	// ECC_SIGNATURE_ALGORITHM=ECDSA (on ECC_CURVE: P256, the default, or
	// P384), else RSA of WORKLOAD_RSA_KEY_SIZE bits (2048).
	KeyType pki.KeyType
	// XDSRoots and CARoots verify istiod's certificate on the xDS and CA
	// connections: files (XDS_ROOT_CA, CA_ROOT_CA), or SystemRoots for the
	// system's trust store. XDSRoots is "" unless set (see XDSRootsPath);
	// CARoots defaults to RootCertPath.
	XDSRoots, CARoots string
	FileMountedCerts  bool
	// OutputCerts is where key, chain and root are also written (OUTPUT_CERTS;
	// with GRPC_XDS_BOOTSTRAP it defaults to "certs" beside the bootstrap).
	OutputCerts string

	DisableEnvoy bool
	// ExitOnZeroConnections stops Envoy, MinDrain after it starts draining,
	// once its listeners hold no connection, instead of after
	// terminationDrainDuration (EXIT_ON_ZERO_ACTIVE_CONNECTIONS,
	// MINIMUM_DRAIN_DURATION: 5s).
	ExitOnZeroConnections bool
	MinDrain              time.Duration
	// DeltaXDS has Envoy use delta xDS (ISTIO_DELTA_XDS, default true, as
	// Istio's agent); false: state of the world.
	DeltaXDS   bool
	DNSCapture bool
	// DNSServer runs the DNS proxy without DNS capture, for gateways
	// (ISTIO_META_ENABLE_DNS_SERVER).
	DNSServer bool
	// DNSForwardTimeout bounds each forwarded query's attempt at one
	// upstream (DNS_FORWARD_TIMEOUT; zero: the DNS proxy's default).
	DNSForwardTimeout time.Duration
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
	// HTTP2Probing lets HTTPS probes negotiate HTTP/2
	// (ISTIO_ENABLE_HTTP2_PROBING, default true).
	HTTP2Probing bool
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
	pc, err := ParseProxyConfig(vars["PROXY_CONFIG"])
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
		Plaintext:  pc.ControlPlaneAuthPolicy == AuthNone,

		SecretTTL:        e.duration("SECRET_TTL", "24h"),
		GraceRatio:       e.ratio("SECRET_GRACE_PERIOD_RATIO", "0.5"),
		GraceJitter:      e.fraction("SECRET_GRACE_PERIOD_RATIO_JITTER", "0.01"),
		KeyType:          e.keyType("ECC_SIGNATURE_ALGORITHM", "ECC_CURVE", "WORKLOAD_RSA_KEY_SIZE"),
		XDSRoots:         e.str("XDS_ROOT_CA", ""),
		CARoots:          e.str("CA_ROOT_CA", RootCertPath),
		FileMountedCerts: e.boolean("FILE_MOUNTED_CERTS"),
		OutputCerts:      e.str("OUTPUT_CERTS", ""),

		DisableEnvoy:          e.boolean("DISABLE_ENVOY"),
		DeltaXDS:              e.booleanOr("ISTIO_DELTA_XDS", true),
		DNSCapture:            e.boolean("ISTIO_META_DNS_CAPTURE"),
		DNSServer:             e.boolean("ISTIO_META_ENABLE_DNS_SERVER"),
		ExitOnZeroConnections: e.boolean("EXIT_ON_ZERO_ACTIVE_CONNECTIONS"),
		MinDrain:              e.duration("MINIMUM_DRAIN_DURATION", "5s"),
		DNSForwardTimeout:     e.optionalDuration("DNS_FORWARD_TIMEOUT"),
		DNSAddrs:              e.dnsAddrs("DNS_PROXY_ADDR", DefaultDNSProxyAddr),
		DNSForwardParallel:    e.boolean("DNS_FORWARD_PARALLEL"),
		AppProbers:            e.probers("ISTIO_KUBE_APP_PROBERS"),
		HTTP2Probing:          e.booleanOr("ISTIO_ENABLE_HTTP2_PROBING", true),
		PrometheusScrape:      e.scrape("ISTIO_PROMETHEUS_ANNOTATIONS"),
		Labels:                e.labels("ISTIO_METAJSON_LABELS"),

		WorkloadIdentitySocket: e.str("WORKLOAD_IDENTITY_SOCKET_FILE", "socket"),

		GRPCBootstrap: e.str("GRPC_XDS_BOOTSTRAP", ""),
		TokenPath:     TokenPath, RootCertPath: RootCertPath, WorkDir: ".",
	}
	if c.InstanceIP != "" {
		if _, err := netip.ParseAddr(c.InstanceIP); err != nil {
			e.fail("INSTANCE_IP", c.InstanceIP, "not an IP address")
		}
	}
	// Certificates come from istiod's CA for the pod's token; Istio's other
	// providers and credentials (Google's) are refused, not ignored.
	e.only("CA_PROVIDER", "Citadel")
	e.only("CREDENTIAL_FETCHER_TYPE", "JWT")
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

// CAOnXDSConnection reports whether CSRs can go over the connection to
// istiod: the CA is at the discovery address and is verified as istiod is.
func (c *Config) CAOnXDSConnection() bool {
	return c.CAAddr == c.Proxy.GetDiscoveryAddress() && c.CARoots == c.XDSRootsPath() && c.CAServerName == c.IstiodSAN
}

// XDSRootsPath is the file of roots that verify istiod on the xDS
// connection (relative to WorkDir, or SystemRoots), found as Istio's agent
// finds it: XDS_ROOT_CA; else ./etc/certs/root-cert.pem when it is there
// (certificates mounted in the pod); else, with FILE_MOUNTED_CERTS, the
// TLS_CLIENT_ROOT_CERT metadata when set; else the mesh root.
func (c *Config) XDSRootsPath() string {
	mounted := FileCertDir + "/root-cert.pem"
	switch {
	case c.XDSRoots != "":
		return c.XDSRoots
	case fileExists(c.Path(mounted)):
		return mounted
	case c.FileMountedCerts && c.Metadata["TLS_CLIENT_ROOT_CERT"] != "":
		return c.Metadata["TLS_CLIENT_ROOT_CERT"]
	}
	return RootCertPath
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// DNSProxy reports whether the agent runs its DNS proxy: a sidecar that
// captures DNS, or any proxy with ISTIO_META_ENABLE_DNS_SERVER, as Istio's.
func (c *Config) DNSProxy() bool { return c.DNSCapture && c.Type == "sidecar" || c.DNSServer }

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
