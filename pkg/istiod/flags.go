package istiod

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/logflags"
	"github.com/spf13/pflag"
)

// Flags is the command line: the Config plus process settings.
type Flags struct {
	// Config is istiod's configuration.
	Config Config
	// LogLevel is the slog level (debug, info, warn, error).
	LogLevel slog.Level
	// LogJSON is Istio's --log_as_json.
	LogJSON bool
	// SecureGRPCAddr is where the TLS server would listen (":15012");
	// istiod serves it once the CA provides credentials.
	SecureGRPCAddr string
	// Security configures the CA.
	Security Security
	// Webhooks configures the admission webhooks.
	Webhooks Webhooks
	// TrustDomainGiven is set when --trust-domain was given; otherwise the
	// CA takes the mesh config's trustDomain.
	TrustDomainGiven bool
	// Unapplied lists the Istio arguments given that Skiff accepts but does
	// not act on, as --name=value, for istiod to log once.
	Unapplied []string
}

// compatFlags are pilot-discovery flags that Skiff's istiod accepts so that
// Istio's chart and extraContainerArgs never stop it, without acting on them.
var compatFlags = []struct{ name, value, usage string }{
	{"registries", "Kubernetes", "service registries (Skiff: --config-dir or Kubernetes)"},
	{"clusterRegistriesNamespace", "istio-system", "multicluster secrets namespace (multicluster is not supported)"},
	{"networksConfig", "./etc/istio/config/meshNetworks", "mesh networks file"},
	{"cniNamespace", "", "istio-cni namespace (node taints are not managed)"},
	{"clusterAliases", "", "cluster ID aliases"},
	{"clusterID", "Kubernetes", "this cluster's ID"},
	{"caCertFile", "", "the xDS server's CA certificate (Skiff's CA serves it)"},
	{"tlsCertFile", "", "the webhook server's certificate (Skiff's CA issues it)"},
	{"tlsKeyFile", "", "the webhook server's key (Skiff's CA issues it)"},
	{"tls-cipher-suites", "", "TLS cipher suites"},
	{"tls-min-version", "", "minimum TLS version"},
	{"ctrlz_address", "localhost", "ControlZ address (no ControlZ)"},
	{"shutdownDuration", "10s", "shutdown grace"},
	{"ctrlz_port", "9876", "ControlZ port (no ControlZ)"},
}

// ParseFlags parses istiod's arguments (Istio's pilot-discovery names; a
// leading "discovery" subcommand is accepted) and environment variables:
// PILOT_DEBOUNCE_AFTER, PILOT_DEBOUNCE_MAX, PILOT_ENABLE_EDS_DEBOUNCE and
// PILOT_PUSH_THROTTLE. Flags override the environment.
func ParseFlags(args []string, getenv func(string) string, usage io.Writer) (Flags, error) {
	if len(args) > 0 && args[0] == "discovery" {
		args = args[1:]
	}
	f := Flags{Config: DefaultConfig(), SecureGRPCAddr: ":15012"}
	c := &f.Config
	if err := envDefaults(c, getenv); err != nil {
		return f, err
	}
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		c.Namespace = ns
	}
	if rev := getenv("REVISION"); rev != "default" {
		c.Revision = rev
	}
	c.PodName = getenv("POD_NAME")
	if c.PodName == "" {
		c.PodName, _ = os.Hostname()
	}
	if v := getenv("ENABLE_DEBUG_ENDPOINT_AUTH"); v != "" {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return f, fmt.Errorf("ENABLE_DEBUG_ENDPOINT_AUTH=%q: want true or false", v)
		}
		c.DebugAuthOff = !on
	}
	fs := pflag.NewFlagSet("istiod", pflag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.ConfigDir, "config-dir", "", "read services and Istio config from YAML files in this directory (watched)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "use this kubeconfig to watch a Kubernetes cluster")
	inCluster := fs.Bool("in-cluster", false, "watch the cluster istiod runs in (default when neither --config-dir nor --kubeconfig is given and KUBERNETES_SERVICE_HOST is set)")
	fs.StringVar(&c.GRPCAddr, "grpcAddr", c.GRPCAddr, "plaintext xDS address")
	fs.StringVar(&f.SecureGRPCAddr, "secureGRPCAddr", f.SecureGRPCAddr, "TLS xDS and CA address (served when the CA provides certificates)")
	fs.StringVar(&c.MonitoringAddr, "monitoringAddr", c.MonitoringAddr, "metrics and readiness address (empty disables)")
	fs.StringVar(&c.DebugAddr, "httpAddr", c.DebugAddr, "debug endpoints address (empty disables)")
	fs.DurationVar(&c.DebounceAfter, "debounce-after", c.DebounceAfter, "quiet period that ends a burst of changes (PILOT_DEBOUNCE_AFTER)")
	fs.DurationVar(&c.DebounceMax, "debounce-max", c.DebounceMax, "longest a burst of changes delays a push (PILOT_DEBOUNCE_MAX)")
	fs.BoolVar(&c.EDSDebounce, "eds-debounce", c.EDSDebounce, "debounce endpoint-only changes too (PILOT_ENABLE_EDS_DEBOUNCE)")
	fs.IntVar(&c.PushConcurrency, "push-concurrency", c.PushConcurrency, "proxies pushed to at once (PILOT_PUSH_THROTTLE)")
	fs.StringVar(&c.MeshConfigFile, "meshConfig", c.MeshConfigFile, "mesh configuration file; when absent, the istio ConfigMap (istio-REVISION) in istiod's namespace")
	if v := getenv("VALIDATION_DENY_MISSING_HOSTS"); v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return f, fmt.Errorf("VALIDATION_DENY_MISSING_HOSTS=%q: want true or false", v)
		}
		f.Webhooks.DenyMissingHosts = b
	}
	f.Security.Namespace = c.Namespace
	f.Security.register(fs)
	f.Webhooks.register(fs)
	// Istio's names for what Skiff also does.
	fs.StringVar(&c.ConfigDir, "configDir", "", "same as --config-dir (Istio's name)")
	fs.StringVar(&f.Webhooks.Addr, "httpsAddr", f.Webhooks.Addr, "same as --webhookAddr (Istio's name)")
	fs.DurationVar(&c.Keepalive.Interval, "keepaliveInterval", c.Keepalive.Interval, "ping a connection idle this long")
	fs.DurationVar(&c.Keepalive.Timeout, "keepaliveTimeout", c.Keepalive.Timeout, "close a connection whose ping is not answered in this time")
	fs.DurationVar(&c.Keepalive.MaxConnectionAge, "keepaliveMaxServerConnectionAge", c.Keepalive.MaxConnectionAge,
		"close xDS connections this old so proxies rebalance over istiod replicas (0: never)")
	fs.StringVar(&c.Domain, "domain", c.Domain, "the cluster's DNS domain: Kubernetes services are served as NAME.NS.svc.DOMAIN")
	fs.Float32Var(&c.KubeQPS, "kubernetesApiQPS", c.KubeQPS, "requests a second istiod may make of the Kubernetes API server (TokenReviews included)")
	fs.IntVar(&c.KubeBurst, "kubernetesApiBurst", c.KubeBurst, "requests istiod may make of the Kubernetes API server at once above kubernetesApiQPS")
	for _, cf := range compatFlags {
		fs.String(cf.name, cf.value, "accepted for compatibility: "+cf.usage)
	}
	fs.Bool("profile", true, "accepted for compatibility (pprof is on the debug address)")
	logs := logflags.Register(fs, "default:info")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error (or Istio's --log_output_level)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if fs.Changed("kubernetesApiQPS") && !(c.KubeQPS > 0) {
		return f, fmt.Errorf("kubernetesApiQPS %v: must be positive", c.KubeQPS)
	}
	if fs.Changed("kubernetesApiBurst") && c.KubeBurst <= 0 {
		return f, fmt.Errorf("kubernetesApiBurst %d: must be positive", c.KubeBurst)
	}
	if fs.Changed("log_output_level") {
		lvl, err := logs.Level()
		if err != nil {
			return f, err
		}
		f.LogLevel = lvl
	} else if err := f.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return f, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
	f.TrustDomainGiven = fs.Changed("trust-domain")
	f.LogJSON = logs.JSON()
	f.Unapplied = logs.Unapplied()
	fs.Visit(func(fl *pflag.Flag) {
		if fl.Name == "profile" || slices.ContainsFunc(compatFlags, func(cf struct{ name, value, usage string }) bool { return cf.name == fl.Name }) {
			f.Unapplied = append(f.Unapplied, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	// Istio's chart sets KUBECONFIG to a remote cluster's config that is
	// mounted only for an external control plane; without the file, istiod
	// uses its in-cluster credentials, as client-go's loading rules do.
	if k := getenv("KUBECONFIG"); k != "" && c.ConfigDir == "" && c.Kubeconfig == "" {
		if _, err := os.Stat(k); err == nil {
			c.Kubeconfig = k
		}
	}
	if c.Domain == "" {
		return f, fmt.Errorf("--domain %q: want the cluster's DNS domain (%s)", c.Domain, model.DefaultDomain)
	}
	c.Namespace = f.Security.Namespace // --namespace wins over POD_NAMESPACE
	c.InCluster = *inCluster || (c.ConfigDir == "" && c.Kubeconfig == "" && getenv("KUBERNETES_SERVICE_HOST") != "")
	if err := c.Validate(); err != nil {
		return f, err
	}
	return f, nil
}

func envDefaults(c *Config, getenv func(string) string) error {
	dur := func(name string, dst *time.Duration) error {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
			*dst = d
		}
		return nil
	}
	if err := dur("PILOT_DEBOUNCE_AFTER", &c.DebounceAfter); err != nil {
		return err
	}
	if err := dur("PILOT_DEBOUNCE_MAX", &c.DebounceMax); err != nil {
		return err
	}
	if v := getenv("PILOT_ENABLE_EDS_DEBOUNCE"); v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("PILOT_ENABLE_EDS_DEBOUNCE=%q: want true or false", v)
		}
		c.EDSDebounce = b
	}
	if v := getenv("PILOT_ENABLE_XDS_IDENTITY_CHECK"); v != "" {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("PILOT_ENABLE_XDS_IDENTITY_CHECK=%q: want true or false", v)
		}
		c.XDSIdentityCheckOff = !on
	}
	switch v := getenv("ISTIO_KUBE_CLIENT_CONTENT_TYPE"); v {
	case "", "protobuf":
	case "json":
		c.KubeJSON = true
	default:
		return fmt.Errorf("ISTIO_KUBE_CLIENT_CONTENT_TYPE=%q: want protobuf or json", v)
	}
	if v := getenv("PILOT_PUSH_THROTTLE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("PILOT_PUSH_THROTTLE=%q: want a positive number", v)
		}
		c.PushConcurrency = n
	}
	return nil
}
