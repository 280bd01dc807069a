package istiod

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// Config is istiod's typed configuration, parsed and validated by the
// command.
type Config struct {
	// ConfigDir, when set, selects the file registry (YAML files, watched).
	ConfigDir string
	// Kubeconfig selects the Kubernetes registry with that kubeconfig.
	Kubeconfig string
	// InCluster selects the Kubernetes registry with in-cluster credentials.
	InCluster bool
	// GRPCAddr is the plaintext xDS address (":15010").
	GRPCAddr string
	// MonitoringAddr serves /metrics and /ready (":15014"); empty disables.
	MonitoringAddr string
	// DebugAddr serves /debug/... (":8080"); empty disables.
	DebugAddr string
	// DebounceAfter is the quiet period that ends a burst of changes.
	DebounceAfter time.Duration
	// DebounceMax bounds how long a burst delays a push.
	DebounceMax time.Duration
	// EDSDebounce sends endpoint-only changes through the debouncer too
	// (Istio's PILOT_ENABLE_EDS_DEBOUNCE, default true); when false they
	// are pushed as soon as they are seen.
	EDSDebounce bool
	// PushConcurrency bounds proxies pushed to at once.
	PushConcurrency int
	// Keepalive is the gRPC servers' connection keepalive.
	Keepalive Keepalive
	// MeshConfigFile is the mesh config file (Istio's --meshConfig); when
	// it does not exist, the Kubernetes registry's istio ConfigMap (or
	// istio-REVISION) in Namespace is followed, else Istio's defaults.
	MeshConfigFile string
	// Namespace is istiod's namespace (POD_NAMESPACE).
	Namespace string
	// Domain is the cluster's DNS domain (Istio's --domain): Kubernetes
	// services are served as NAME.NS.svc.DOMAIN, and short hosts in
	// configuration resolve under it ("" is model.DefaultDomain).
	Domain string
	// Revision is istiod's revision (REVISION), "" for the default.
	Revision string
	// PodName names this replica (POD_NAME, else the host name) in syncz.
	PodName string
	// DebugAuthOff serves the xDS debug types to callers that proved no
	// identity (Istio's ENABLE_DEBUG_ENDPOINT_AUTH=false).
	DebugAuthOff bool
	// KubeQPS and KubeBurst bound istiod's requests to the API server
	// (Istio's --kubernetesApiQPS and --kubernetesApiBurst): the
	// registry's, the CA's TokenReviews, the webhooks' and the leader's.
	// Zero is Istio's default, 80 and 160.
	KubeQPS   float32
	KubeBurst int
	// Clients are the API server clients every part of istiod shares, as
	// Istio's istiod shares one client: one connection, one rate limit
	// (NewKubeClients). Not a flag: the caller sets it. When nil, each
	// part makes its own from Kubeconfig or the pod's service account.
	Clients *kuberest.Clients
	// KubeJSON makes the clients of Kubernetes' own types speak JSON
	// (ISTIO_KUBE_CLIENT_CONTENT_TYPE=json); by default they speak
	// protobuf, as Istio's do. Istio's types are JSON either way.
	KubeJSON bool
	// XDSIdentityCheckOff lets a proxy on the TLS port claim a node of
	// another namespace or service account than its certificate's or
	// token's (Istio's PILOT_ENABLE_XDS_IDENTITY_CHECK=false).
	XDSIdentityCheckOff bool
}

// IstioVersion is the Istio release whose interfaces istiod implements, as
// it reports itself to istioctl.
const IstioVersion = "1.31.0"

// Keepalive is pilot-discovery's keepalive settings for xDS connections.
type Keepalive struct {
	// Interval is how long a connection may be idle before it is pinged.
	Interval time.Duration
	// Timeout is how long an unanswered ping waits before the close.
	Timeout time.Duration
	// MaxConnectionAge closes older connections gracefully, so proxies
	// spread over replicas; 0 never does.
	MaxConnectionAge time.Duration
}

// DefaultConfig returns Istio's defaults.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:        ":15010",
		MonitoringAddr:  ":15014",
		DebugAddr:       ":8080",
		DebounceAfter:   100 * time.Millisecond,
		DebounceMax:     10 * time.Second,
		EDSDebounce:     true,
		PushConcurrency: 100,
		MeshConfigFile:  "./etc/istio/config/mesh",
		Namespace:       "istio-system",
		Domain:          model.DefaultDomain,
		Keepalive:       Keepalive{Interval: 30 * time.Second, Timeout: 10 * time.Second},
		KubeQPS:         defaultKubeQPS,
		KubeBurst:       defaultKubeBurst,
	}
}

// Istio's --kubernetesApiQPS and --kubernetesApiBurst defaults.
const (
	defaultKubeQPS   = 80
	defaultKubeBurst = 160
)

// Validate checks c; errors name the setting and the value.
func (c Config) Validate() error {
	var errs []error
	sources := 0
	for _, set := range []bool{c.ConfigDir != "", c.Kubeconfig != "", c.InCluster} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		errs = append(errs, fmt.Errorf("config source: want exactly one of --config-dir, --kubeconfig or in-cluster, got %d", sources))
	}
	for _, a := range []struct{ name, v string }{{"grpcAddr", c.GRPCAddr}, {"monitoringAddr", c.MonitoringAddr}, {"debugAddr", c.DebugAddr}} {
		if a.v == "" && a.name != "grpcAddr" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", a.name, a.v, err))
		}
	}
	if c.DebounceAfter <= 0 {
		errs = append(errs, fmt.Errorf("debounce-after %v: must be positive", c.DebounceAfter))
	}
	if c.DebounceMax < c.DebounceAfter {
		errs = append(errs, fmt.Errorf("debounce-max %v: must be at least debounce-after %v", c.DebounceMax, c.DebounceAfter))
	}
	if err := validDomain(c.Domain); err != nil {
		errs = append(errs, fmt.Errorf("domain %q: %w", c.Domain, err))
	}
	if c.PushConcurrency <= 0 {
		errs = append(errs, fmt.Errorf("push-concurrency %d: must be positive", c.PushConcurrency))
	}
	if c.KubeQPS < 0 {
		errs = append(errs, fmt.Errorf("kubernetesApiQPS %v: must be positive", c.KubeQPS))
	}
	if c.KubeBurst < 0 {
		errs = append(errs, fmt.Errorf("kubernetesApiBurst %d: must be positive", c.KubeBurst))
	}
	return errors.Join(errs...)
}

// validDomain checks a cluster DNS domain ("" is the default): dot-separated
// labels of letters, digits and inner hyphens, as Kubernetes'
// --cluster-domain takes.
func validDomain(d string) error {
	if d == "" {
		return nil
	}
	d = strings.TrimSuffix(d, ".")
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q: want 1 to 63 letters, digits or inner hyphens", l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("label %q: want 1 to 63 letters, digits or inner hyphens", l)
			}
		}
	}
	return nil
}
