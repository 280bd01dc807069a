package config

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

func TestProxyConfigJSONAndYAML(t *testing.T) {
	for name, in := range map[string]string{
		"json": `{"discoveryAddress": "istiod.x.svc:15010", "controlPlaneAuthPolicy": "NONE", "drainDuration": "10s", "statusPort": 16020, "proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}, "concurrency": 2}`,
		"yaml": "discoveryAddress: istiod.x.svc:15010\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nstatusPort: 16020\nproxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"true\"\nconcurrency: 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			pc, err := ParseProxyConfig(in)
			if err != nil {
				t.Fatal(err)
			}
			if pc.DiscoveryAddress != "istiod.x.svc:15010" || pc.ControlPlaneAuthPolicy != AuthNone ||
				pc.DrainDuration != 10*time.Second || pc.StatusPort != 16020 || pc.Concurrency == nil || *pc.Concurrency != 2 {
				t.Errorf("parsed %v", pc)
			}
			// Defaults survive where the input is silent.
			if pc.ProxyAdminPort != 15000 || pc.TerminationDrainDuration != 5*time.Second {
				t.Errorf("defaults lost: %v", pc)
			}
		})
	}
}

// defaults is what Load returns for an empty environment.
func defaults() *Config {
	return &Config{
		Proxy: DefaultProxyConfig(), Type: "sidecar",
		PodNamespace: "default", Cluster: "Kubernetes",
		Identity: spiffe.ID{TrustDomain: "cluster.local", Namespace: "default", ServiceAccount: "default"},
		CAAddr:   DefaultAddress, SecretTTL: 24 * time.Hour, GraceRatio: 0.5, GraceJitter: 0.01, KeyType: pki.RSA2048, DeltaXDS: true,
		CARoots: RootCertPath, HTTP2Probing: true, MinDrain: 5 * time.Second,
		DNSAddrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:15053"), netip.MustParseAddrPort("[::1]:15053")},
		Metadata: map[string]string{}, WorkloadIdentitySocket: "socket", TokenPath: TokenPath, RootCertPath: RootCertPath, WorkDir: ".",
	}
}

var cmpConfig = cmp.Options{
	cmpopts.EquateComparable(netip.AddrPort{}), cmpopts.IgnoreUnexported(ProxyConfig{}),
	// A proxy config compares by its typed fields and its whole document.
	cmp.Transformer("proxyConfig", func(p *ProxyConfig) proxyConfigView {
		m, err := p.AsMap()
		return proxyConfigView{Typed: *p, Doc: m, Err: err}
	}),
}

type proxyConfigView struct {
	Typed ProxyConfig
	Doc   map[string]any
	Err   error
}

// TestLoad is the agent's environment matrix: every variable Load reads,
// in its accepted spellings, against the Config it yields.
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  string // default sidecar
		env  []string
		want func(c *Config)
	}{
		{name: "nothing set", want: func(*Config) {}},
		{name: "router", typ: "router", want: func(c *Config) { c.Type = "router" }},
		{
			name: "the pod",
			env: []string{"POD_NAME=reviews-v1-abc", "POD_NAMESPACE=bookinfo", "INSTANCE_IP=10.1.0.5", "SERVICE_ACCOUNT=reviews",
				"TRUST_DOMAIN=example.org", "ISTIO_META_CLUSTER_ID=c1", `ISTIO_METAJSON_LABELS={"app":"reviews"}`},
			want: func(c *Config) {
				c.PodName, c.PodNamespace, c.InstanceIP, c.Cluster = "reviews-v1-abc", "bookinfo", "10.1.0.5", "c1"
				c.Identity = spiffe.ID{TrustDomain: "example.org", Namespace: "bookinfo", ServiceAccount: "reviews"}
				c.Metadata["CLUSTER_ID"] = "c1"
				c.Labels = map[string]string{"app": "reviews"}
			},
		},
		{name: "IPv6 instance", env: []string{"INSTANCE_IP=fd00::5"}, want: func(c *Config) { c.InstanceIP = "fd00::5" }},
		{
			name: "proxyMetadata acts as env and wins over it",
			env: []string{"SECRET_TTL=2h", "ISTIO_META_MESH_ID=m0", "DNS_PROXY_ADDR=127.0.0.1:1053",
				`PROXY_CONFIG={"proxyMetadata": {"SECRET_TTL": "1h", "ISTIO_META_MESH_ID": "m1", "DNS_PROXY_ADDR": "localhost:15054"}}`},
			want: func(c *Config) {
				c.Proxy.ProxyMetadata = map[string]string{"SECRET_TTL": "1h", "ISTIO_META_MESH_ID": "m1", "DNS_PROXY_ADDR": "localhost:15054"}
				c.SecretTTL = time.Hour
				c.Metadata["MESH_ID"] = "m1"
				c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:15054"), netip.MustParseAddrPort("[::1]:15054")}
			},
		},
		{
			name: "plaintext control plane",
			env:  []string{`PROXY_CONFIG=discoveryAddress: istiod.x.svc:15010` + "\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nconcurrency: 2\n"},
			want: func(c *Config) {
				two := int32(2)
				c.Proxy.DiscoveryAddress, c.Proxy.ControlPlaneAuthPolicy = "istiod.x.svc:15010", AuthNone
				c.Proxy.DrainDuration, c.Proxy.Concurrency = 10*time.Second, &two
				c.Plaintext, c.CAAddr = true, "istiod.x.svc:15010"
			},
		},
		{name: "CA elsewhere", env: []string{"CA_ADDR=ca.x.svc:15012"}, want: func(c *Config) { c.CAAddr = "ca.x.svc:15012" }},
		{
			name: "istiod's name for an IP address",
			env:  []string{"ISTIOD_SAN=istiod.istio-system.svc"},
			want: func(c *Config) { c.IstiodSAN, c.CAServerName = "istiod.istio-system.svc", "istiod.istio-system.svc" },
		},
		{
			name: "istiod's name, CA elsewhere",
			env:  []string{"ISTIOD_SAN=istiod.istio-system.svc", "CA_ADDR=ca.x.svc:15012"},
			want: func(c *Config) { c.IstiodSAN, c.CAAddr = "istiod.istio-system.svc", "ca.x.svc:15012" },
		},
		{
			name: "secret lifetime",
			env:  []string{"SECRET_TTL=90m", "SECRET_GRACE_PERIOD_RATIO=0.25"},
			want: func(c *Config) { c.SecretTTL, c.GraceRatio = 90*time.Minute, 0.25 },
		},
		{name: "ECDSA", env: []string{"ECC_SIGNATURE_ALGORITHM=ECDSA"}, want: func(c *Config) { c.KeyType = pki.ECDSAP256 }},
		{name: "ECDSA P-384", env: []string{"ECC_SIGNATURE_ALGORITHM=ECDSA", "ECC_CURVE=P384"}, want: func(c *Config) { c.KeyType = pki.ECDSAP384 }},
		{name: "a curve without ECDSA", env: []string{"ECC_CURVE=P384"}, want: func(*Config) {}},
		{name: "rotation jitter", env: []string{"SECRET_GRACE_PERIOD_RATIO_JITTER=0"}, want: func(c *Config) { c.GraceJitter = 0 }},
		{
			name: "roots for xDS and the CA",
			env:  []string{"XDS_ROOT_CA=SYSTEM", "CA_ROOT_CA=/etc/ca/root.pem"},
			want: func(c *Config) { c.XDSRoots, c.CARoots = SystemRoots, "/etc/ca/root.pem" },
		},
		{name: "DNS server at a gateway", typ: "router", env: []string{"ISTIO_META_ENABLE_DNS_SERVER=true"}, want: func(c *Config) { c.Type, c.DNSServer, c.Metadata["ENABLE_DNS_SERVER"] = "router", true, "true" }},
		{name: "HTTPS probes on HTTP/1.1", env: []string{"ISTIO_ENABLE_HTTP2_PROBING=false"}, want: func(c *Config) { c.HTTP2Probing = false }},
		{name: "Istio's own CA and credentials", env: []string{"CA_PROVIDER=Citadel", "CREDENTIAL_FETCHER_TYPE=JWT"}, want: func(*Config) {}},
		{
			name: "exit when connections end",
			env:  []string{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS=true", "MINIMUM_DRAIN_DURATION=2s"},
			want: func(c *Config) { c.ExitOnZeroConnections, c.MinDrain = true, 2*time.Second },
		},
		{name: "DNS forward timeout", env: []string{"DNS_FORWARD_TIMEOUT=2s"}, want: func(c *Config) { c.DNSForwardTimeout = 2 * time.Second }},
		{name: "RSA 3072", env: []string{"WORKLOAD_RSA_KEY_SIZE=3072"}, want: func(c *Config) { c.KeyType = pki.RSA3072 }},
		{name: "RSA 4096", env: []string{"WORKLOAD_RSA_KEY_SIZE=4096"}, want: func(c *Config) { c.KeyType = pki.RSA4096 }},
		{
			name: "ECDSA wins over the RSA size",
			env:  []string{"ECC_SIGNATURE_ALGORITHM=ECDSA", "WORKLOAD_RSA_KEY_SIZE=4096"},
			want: func(c *Config) { c.KeyType = pki.ECDSAP256 },
		},
		{
			name: "booleans in strconv's spellings",
			env:  []string{"FILE_MOUNTED_CERTS=1", "DISABLE_ENVOY=TRUE", "ISTIO_META_DNS_CAPTURE=true", "DNS_FORWARD_PARALLEL=t"},
			want: func(c *Config) {
				c.FileMountedCerts, c.DisableEnvoy, c.DNSCapture, c.DNSForwardParallel = true, true, true, true
				c.Metadata["DNS_CAPTURE"] = "true"
			},
		},
		{name: "booleans off", env: []string{"DNS_FORWARD_PARALLEL=false", "DISABLE_ENVOY=0"}, want: func(*Config) {}},
		{name: "state-of-the-world xDS", env: []string{"ISTIO_DELTA_XDS=false"}, want: func(c *Config) { c.DeltaXDS = false }},
		{
			name: "DNS on one IPv4 address",
			env:  []string{"DNS_PROXY_ADDR=127.0.0.1:5353"},
			want: func(c *Config) { c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5353")} },
		},
		{
			name: "DNS on one IPv6 address",
			env:  []string{"DNS_PROXY_ADDR=[::1]:15053"},
			want: func(c *Config) { c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("[::1]:15053")} },
		},
		{
			name: "DNS on an IPv4-mapped address",
			env:  []string{"DNS_PROXY_ADDR=[::ffff:127.0.0.1]:53"},
			want: func(c *Config) { c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")} },
		},
		{
			name: "DNS on Istio's default spelling",
			env:  []string{"DNS_PROXY_ADDR=localhost:15053"},
			want: func(*Config) {},
		},
		{
			name: "DNS on every address",
			env:  []string{"DNS_PROXY_ADDR=:53"},
			want: func(c *Config) {
				c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:53"), netip.MustParseAddrPort("[::]:53")}
			},
		},
		{
			name: "DNS on a port the proxy picks",
			env:  []string{"DNS_PROXY_ADDR=LOCALHOST:0"},
			want: func(c *Config) {
				c.DNSAddrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("[::1]:0")}
			},
		},
		{
			name: "proxyless gRPC: certificates beside the bootstrap",
			env:  []string{"GRPC_XDS_BOOTSTRAP=/etc/istio/proxy/grpc-bootstrap.json"},
			want: func(c *Config) {
				c.GRPCBootstrap, c.OutputCerts = "/etc/istio/proxy/grpc-bootstrap.json", "/etc/istio/proxy/certs"
			},
		},
		{
			name: "proxyless gRPC with OUTPUT_CERTS",
			env:  []string{"GRPC_XDS_BOOTSTRAP=/b/bootstrap.json", "OUTPUT_CERTS=/var/lib/istio/data"},
			want: func(c *Config) { c.GRPCBootstrap, c.OutputCerts = "/b/bootstrap.json", "/var/lib/istio/data" },
		},
		{
			name: "Istio's grpc-agent template: no Envoy, OUTPUT_CERTS, the bootstrap at Istio's default path",
			env:  []string{"DISABLE_ENVOY=true", "OUTPUT_CERTS=/var/lib/istio/data"},
			want: func(c *Config) {
				c.DisableEnvoy, c.OutputCerts, c.GRPCBootstrap = true, "/var/lib/istio/data", "./etc/istio/proxy/grpc-bootstrap.json"
			},
		},
		{
			name: "no Envoy and no certificates written: no bootstrap",
			env:  []string{"DISABLE_ENVOY=true"},
			want: func(c *Config) { c.DisableEnvoy = true },
		},
		{
			name: "app probes",
			env:  []string{`ISTIO_KUBE_APP_PROBERS={"/app-health/app/livez": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 3}}`},
			want: func(c *Config) {
				c.AppProbers = map[string]*Prober{"/app-health/app/livez": {TCPSocket: &TCPAction{Port: "8080"}, TimeoutSeconds: 3}}
			},
		},
		{
			name: "prometheus scrape",
			env:  []string{`ISTIO_PROMETHEUS_ANNOTATIONS={"scrape": "true", "port": "9090"}`},
			want: func(c *Config) { c.PrometheusScrape = &Scrape{Scrape: true, Path: "/metrics", Port: "9090"} },
		},
		{
			name: "prometheus scrape off",
			env:  []string{`ISTIO_PROMETHEUS_ANNOTATIONS={"scrape": "false", "port": "9090"}`},
			want: func(*Config) {},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ := tc.typ
			if typ == "" {
				typ = "sidecar"
			}
			got, err := Load(tc.env, typ)
			if err != nil {
				t.Fatal(err)
			}
			want := defaults()
			tc.want(want)
			if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadRejects: a bad value is a start-up error that names the variable
// and quotes the value (PROXY_CONFIG and the probes name the field instead).
func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want []string // default: the first variable's name and quoted value
	}{
		{env: []string{"INSTANCE_IP=not-an-ip"}},
		{env: []string{"SECRET_TTL=-1s"}},
		{env: []string{"SECRET_TTL=soon"}},
		{env: []string{"SECRET_GRACE_PERIOD_RATIO=1.5"}},
		{env: []string{"SECRET_GRACE_PERIOD_RATIO=half"}},
		{env: []string{"ECC_SIGNATURE_ALGORITHM=DSA"}},
		{env: []string{"WORKLOAD_RSA_KEY_SIZE=1024"}},
		{env: []string{"ECC_CURVE=P521"}},
		{env: []string{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS=sure"}},
		{env: []string{"MINIMUM_DRAIN_DURATION=soon"}},
		{env: []string{"CA_PROVIDER=GoogleCA"}},
		{env: []string{"CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine"}},
		{env: []string{"SECRET_GRACE_PERIOD_RATIO_JITTER=-0.1"}},
		{env: []string{"DNS_FORWARD_TIMEOUT=0s"}},
		{env: []string{"DNS_FORWARD_TIMEOUT=soon"}},
		{env: []string{"ISTIO_META_ENABLE_DNS_SERVER=yes"}},
		{env: []string{"FILE_MOUNTED_CERTS=perhaps"}},
		{env: []string{"DISABLE_ENVOY=yes"}},
		{env: []string{"ISTIO_META_DNS_CAPTURE=on"}},
		{env: []string{"DNS_FORWARD_PARALLEL=maybe"}},
		{env: []string{"DNS_PROXY_ADDR=nope"}, want: []string{`DNS_PROXY_ADDR="nope"`, "host:port"}},
		{env: []string{"DNS_PROXY_ADDR=127.0.0.1"}},
		{env: []string{"DNS_PROXY_ADDR=127.0.0.1:70000"}, want: []string{`DNS_PROXY_ADDR="127.0.0.1:70000"`, `port "70000"`}},
		{env: []string{"DNS_PROXY_ADDR=kube-dns:53"}, want: []string{`DNS_PROXY_ADDR="kube-dns:53"`, "not an IP address or localhost"}},
		{env: []string{`PROXY_CONFIG={"proxyMetadata": {"DNS_PROXY_ADDR": "x"}}`}, want: []string{`DNS_PROXY_ADDR="x"`}},
		{env: []string{"TRUST_DOMAIN=Cluster.Local"}},
		{env: []string{"SERVICE_ACCOUNT=a/b"}},
		{env: []string{"POD_NAMESPACE=a b"}},
		{env: []string{"ISTIO_METAJSON_LABELS=[1]"}},
		{env: []string{`ISTIO_PROMETHEUS_ANNOTATIONS={`}},
		{env: []string{`ISTIO_KUBE_APP_PROBERS={"/wrong": {"tcpSocket": {"port": 80}}}`}, want: []string{"ISTIO_KUBE_APP_PROBERS", `"/wrong"`}},
		{env: []string{`ISTIO_KUBE_APP_PROBERS={"/app-health/a/livez": {"tcpSocket": {"port": 80}, "grpc": {"port": 1}}}`}, want: []string{"ISTIO_KUBE_APP_PROBERS", "exactly one"}},
		{env: []string{`ISTIO_KUBE_APP_PROBERS={"/app-health/app/livez": 3}`}, want: []string{"ISTIO_KUBE_APP_PROBERS"}},
		{env: []string{`PROXY_CONFIG={"statusPort": 70000}`}, want: []string{"PROXY_CONFIG", "statusPort 70000"}},
		{env: []string{`PROXY_CONFIG={"statusPort": "x"}`}, want: []string{"PROXY_CONFIG"}},
		{env: []string{`PROXY_CONFIG={"discoveryAddress": "nohostport"}`}, want: []string{"PROXY_CONFIG", `discoveryAddress "nohostport"`}},
		{env: []string{`PROXY_CONFIG={"noSuchField": 1}`}, want: []string{"PROXY_CONFIG", "noSuchField"}},
		{env: []string{"PROXY_CONFIG=discoveryAddress: [1, 2"}, want: []string{"PROXY_CONFIG"}},
		{
			env:  []string{"SECRET_TTL=0s", "DNS_PROXY_ADDR=nope"},
			want: []string{`SECRET_TTL="0s"`, `DNS_PROXY_ADDR="nope"`}, // every bad variable at once
		},
	} {
		name, value, _ := strings.Cut(tc.env[0], "=")
		want := tc.want
		if want == nil {
			want = []string{name + "=" + strconv.Quote(value)}
		}
		t.Run(tc.env[0], func(t *testing.T) {
			_, err := Load(tc.env, "sidecar")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := Load(nil, "gateway"); err == nil || !strings.Contains(err.Error(), `"gateway"`) {
		t.Errorf("proxy type gateway: %v", err)
	}
}

func TestNodeID(t *testing.T) {
	c, err := Load([]string{"POD_NAME=reviews-v1-abc", "POD_NAMESPACE=default", "INSTANCE_IP=10.1.0.5"}, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.NodeID(); got != "sidecar~10.1.0.5~reviews-v1-abc.default~default.svc.cluster.local" {
		t.Errorf("node id %s", got)
	}
}

// TestDNSProxy: the DNS proxy runs for a sidecar that captures DNS and for
// any proxy that asks for the server alone, as Istio's agent decides.
func TestDNSProxy(t *testing.T) {
	for _, tc := range []struct {
		typ     string
		env     []string
		running bool
	}{
		{"sidecar", nil, false},
		{"sidecar", []string{"ISTIO_META_DNS_CAPTURE=true"}, true},
		{"router", []string{"ISTIO_META_DNS_CAPTURE=true"}, false},
		{"router", []string{"ISTIO_META_ENABLE_DNS_SERVER=true"}, true},
		{"sidecar", []string{"ISTIO_META_ENABLE_DNS_SERVER=true"}, true},
	} {
		c, err := Load(tc.env, tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.DNSProxy(); got != tc.running {
			t.Errorf("%s %v: DNS proxy %v, want %v", tc.typ, tc.env, got, tc.running)
		}
	}
}

// TestCAOnXDSConnection: CSRs share the connection to istiod only when the
// CA is reached and verified exactly as istiod is.
func TestCAOnXDSConnection(t *testing.T) {
	for _, tc := range []struct {
		env    []string
		shared bool
	}{
		{nil, true},
		{[]string{"ISTIOD_SAN=istiod.istio-system.svc"}, true},
		{[]string{"CA_ADDR=istiod.istio-system.svc:15012"}, true},
		{[]string{"CA_ADDR=ca.example.com:443"}, false},
		{[]string{"CA_ADDR=istiod.istio-system.svc:15012", "ISTIOD_SAN=istiod.istio-system.svc"}, false},
		{[]string{"CA_ROOT_CA=/etc/ca/root.pem"}, false},
		{[]string{"XDS_ROOT_CA=SYSTEM"}, false},
	} {
		c, err := Load(tc.env, "sidecar")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CAOnXDSConnection(); got != tc.shared {
			t.Errorf("%v: CA on the xDS connection %v, want %v", tc.env, got, tc.shared)
		}
	}
}

// TestXDSRootsPath finds istiod's roots for xDS where Istio's agent looks.
func TestXDSRootsPath(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		mounted bool // ./etc/certs/root-cert.pem exists
		want    string
	}{
		{"the mesh root", nil, false, RootCertPath},
		{"mounted certificates first", nil, true, "./etc/certs/root-cert.pem"},
		{"XDS_ROOT_CA first of all", []string{"XDS_ROOT_CA=/etc/roots.pem"}, true, "/etc/roots.pem"},
		{"the system's", []string{"XDS_ROOT_CA=SYSTEM"}, false, SystemRoots},
		{"file-mounted certificates' client root", []string{"FILE_MOUNTED_CERTS=true", "ISTIO_META_TLS_CLIENT_ROOT_CERT=/certs/root.pem"}, false, "/certs/root.pem"},
		{"file-mounted certificates, no client root", []string{"FILE_MOUNTED_CERTS=true"}, false, RootCertPath},
	} {
		c, err := Load(tc.env, "sidecar")
		if err != nil {
			t.Fatal(err)
		}
		c.WorkDir = t.TempDir()
		if tc.mounted {
			if err := os.MkdirAll(c.Path(FileCertDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.Path(FileCertDir+"/root-cert.pem"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.XDSRootsPath(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
