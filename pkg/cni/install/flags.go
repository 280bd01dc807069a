package install

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/repair"
	"github.com/skiff-mesh/skiff/pkg/logflags"
)

// Flags is install-cni's command line: the installer's Config and the
// addresses it serves on.
type Flags struct {
	// Config is what the installer installs, and where.
	Config Config
	// HealthAddr serves /healthz and /readyz (":8000"); empty disables.
	HealthAddr string
	// MetricsAddr serves Prometheus metrics (":15014"); empty disables.
	MetricsAddr string
	// Repair is the race repair controller's settings (Istio's REPAIR_*).
	Repair repair.Config
	// LogLevel and LogJSON are install-cni's own log, from Istio's
	// --log_output_level and --log_as_json.
	LogLevel slog.Level
	LogJSON  bool
	// Unapplied lists the Istio logging flags given that change nothing.
	Unapplied []string
}

// ParseFlags parses install-cni's arguments (Istio's flag names). Each flag's
// default comes from the environment variable its help names, looked up
// with lookupEnv (os.LookupEnv: a variable set to "" counts as set); a flag
// given overrides it. Errors name the flag or variable and the value.
func ParseFlags(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Flags, error) {
	env := envDefaults{lookup: lookupEnv}
	var f Flags
	c := &f.Config
	fs := pflag.NewFlagSet("install-cni", pflag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.NetDir, "mounted-cni-net-dir", env.str("MOUNTED_CNI_NET_DIR", "/host/etc/cni/net.d"), "the node's CNI configuration dir (env MOUNTED_CNI_NET_DIR)")
	fs.StringVar(&c.BinDir, "cni-bin-dir", env.str("CNI_BIN_DIR", "/host/opt/cni/bin"), "the node's CNI plugin dir (env CNI_BIN_DIR)")
	fs.StringVar(&c.AgentRunDir, "cni-agent-run-dir", env.str("CNI_AGENT_RUN_DIR", "/var/run/istio-cni"), "where the plugin's kubeconfig is written (env CNI_AGENT_RUN_DIR)")
	fs.StringVar(&c.PluginSource, "plugin-binary", env.str("CNI_PLUGIN_BINARY", "/opt/cni/bin/istio-cni"), "the plugin binary to install (env CNI_PLUGIN_BINARY)")
	fs.StringVar(&c.LookupSource, "lookup-binary", env.str("CNI_LOOKUP_BINARY", ""), "the plugin's API-server helper to install beside it; empty: "+cni.LookupBinary+" beside --plugin-binary (env CNI_LOOKUP_BINARY)")
	fs.StringVar(&c.TokenPath, "token", env.str("SERVICE_ACCOUNT_TOKEN", "/var/run/secrets/kubernetes.io/serviceaccount/token"), "service-account token (env SERVICE_ACCOUNT_TOKEN)")
	fs.StringVar(&c.CAPath, "ca", env.str("SERVICE_ACCOUNT_CA", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"), "API server CA (env SERVICE_ACCOUNT_CA)")
	fs.StringVar(&c.KubeHost, "kube-host", env.str("KUBERNETES_SERVICE_HOST", ""), "API server host (env KUBERNETES_SERVICE_HOST)")
	fs.Uint16Var(&c.KubePort, "kube-port", env.port("KUBERNETES_SERVICE_PORT", 443), "API server port (env KUBERNETES_SERVICE_PORT)")
	fs.StringVar(&c.KubeCAFile, "kube-ca-file", env.str("KUBE_CA_FILE", ""), "CA the plugin's kubeconfig trusts; empty: the service account's (env KUBE_CA_FILE)")
	fs.BoolVar(&c.SkipTLSVerify, "skip-tls-verify", env.boolean("SKIP_TLS_VERIFY", false), "the plugin's kubeconfig skips the API server's certificate check (env SKIP_TLS_VERIFY)")
	kcMode := fs.Int("kubeconfig-mode", env.integer("KUBECONFIG_MODE", int(DefaultKubeconfigMode)), "file mode of the plugin's kubeconfig, e.g. 0600 (env KUBECONFIG_MODE)")
	excluded := fs.String("exclude-namespaces", env.str("EXCLUDE_NAMESPACES", "kube-system"), "comma list of namespaces whose pods are never captured (env EXCLUDE_NAMESPACES)")
	podNS := fs.String("pod-namespace", env.str("POD_NAMESPACE", "istio-system"), "the agent's namespace (env POD_NAMESPACE)")
	level := fs.String("log-level", env.str("LOG_LEVEL", "info"), "plugin log level: debug, info, warn, error, fatal or none (env LOG_LEVEL)")
	nft := fs.Bool("native-nftables", env.boolean("NATIVE_NFTABLES", false), "the plugin programs nftables directly (env NATIVE_NFTABLES)")
	fs.StringVar(&f.HealthAddr, "health-addr", env.str("HEALTH_ADDR", ":8000"), "health server, /healthz and /readyz (env HEALTH_ADDR; empty disables)")
	monitoring := fs.Uint16("monitoring-port", env.port("MONITORING_PORT", 15014), "Prometheus metrics port, Istio's (env MONITORING_PORT); --metrics-addr wins")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", env.str("METRICS_ADDR", ""), "Prometheus metrics server, host:port (env METRICS_ADDR; default :MONITORING_PORT; empty disables)")
	r := &f.Repair
	*r = repair.DefaultConfig()
	fs.BoolVar(&r.Enabled, "repair-enabled", env.boolean("REPAIR_ENABLED", r.Enabled), "repair pods that started before the plugin was in place (env REPAIR_ENABLED)")
	fs.BoolVar(&r.DeletePods, "repair-delete-pods", env.boolean("REPAIR_DELETE_PODS", false), "delete a broken pod so its owner recreates it (env REPAIR_DELETE_PODS)")
	fs.BoolVar(&r.LabelPods, "repair-label-pods", env.boolean("REPAIR_LABEL_PODS", false), "label a broken pod (env REPAIR_LABEL_PODS)")
	fs.BoolVar(&r.RepairPods, "repair-repair-pods", env.boolean("REPAIR_REPAIR_PODS", false), "Istio's in-place repair: not implemented, reported (env REPAIR_REPAIR_PODS)")
	fs.StringVar(&r.LabelKey, "repair-broken-pod-label-key", env.str("REPAIR_BROKEN_POD_LABEL_KEY", r.LabelKey), "key of the label set on broken pods (env REPAIR_BROKEN_POD_LABEL_KEY)")
	fs.StringVar(&r.LabelValue, "repair-broken-pod-label-value", env.str("REPAIR_BROKEN_POD_LABEL_VALUE", r.LabelValue), "value of the label set on broken pods (env REPAIR_BROKEN_POD_LABEL_VALUE)")
	fs.StringVar(&r.NodeName, "repair-node-name", env.str("REPAIR_NODE_NAME", env.str("NODE_NAME", "")), "the node whose pods are repaired; none: no repair (env REPAIR_NODE_NAME, else NODE_NAME)")
	fs.StringVar(&r.SidecarAnnotation, "repair-sidecar-annotation", env.str("REPAIR_SIDECAR_ANNOTATION", r.SidecarAnnotation), "only pods with this annotation are repaired (env REPAIR_SIDECAR_ANNOTATION)")
	fs.StringVar(&r.InitContainerName, "repair-init-container-name", env.str("REPAIR_INIT_CONTAINER_NAME", r.InitContainerName), "the init container that fails without capture (env REPAIR_INIT_CONTAINER_NAME)")
	fs.StringVar(&r.InitTerminationMsg, "repair-init-container-termination-message", env.str("REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE", ""), "its termination message; empty matches any (env REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE)")
	fs.Int32Var(&r.InitExitCode, "repair-init-container-exit-code", env.exitCode("REPAIR_INIT_CONTAINER_EXIT_CODE", r.InitExitCode), "its exit code; 0 matches any (env REPAIR_INIT_CONTAINER_EXIT_CODE)")
	fs.StringVar(&r.LabelSelector, "repair-label-selectors", env.str("REPAIR_LABEL_SELECTORS", ""), "label selector narrowing the pods watched (env REPAIR_LABEL_SELECTORS)")
	fs.StringVar(&r.FieldSelector, "repair-field-selectors", env.str("REPAIR_FIELD_SELECTORS", ""), "field selector narrowing the pods watched (env REPAIR_FIELD_SELECTORS)")
	chained := fs.Bool("chained-cni-plugin", env.boolean("CHAINED_CNI_PLUGIN", true), "Istio's: chain the plugin into the node's configuration; false is not supported and logged (env CHAINED_CNI_PLUGIN)")
	for _, name := range istioStringOnly {
		fs.String(name, "", "Istio's; accepted, not applied (docs/compatibility.md)")
	}
	for _, name := range istioBoolOnly {
		fs.Bool(name, false, "Istio's; accepted, not applied (docs/compatibility.md)")
	}
	if err := errors.Join(env.errs...); err != nil {
		return f, err
	}
	logs := logflags.Register(fs, "default:info")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	lvl, err := logs.Level()
	if err != nil {
		return f, err
	}
	f.LogLevel, f.LogJSON, f.Unapplied = lvl, logs.JSON(), logs.Unapplied()
	for _, name := range append(slices.Clone(istioStringOnly), istioBoolOnly...) {
		if fl := fs.Lookup(name); fl.Changed {
			f.Unapplied = append(f.Unapplied, "--"+name+"="+fl.Value.String())
		}
	}
	if !*chained {
		f.Unapplied = append(f.Unapplied, "chained-cni-plugin=false: the plugin is chained into the node's configuration all the same")
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// named is a value as the user gave it: by flag, or else by variable.
	named := func(flag, variable, v string) string {
		if fs.Changed(flag) {
			return fmt.Sprintf("--%s %q", flag, v)
		}
		return fmt.Sprintf("%s=%q", variable, v)
	}
	if _, err := cni.ParseLogLevel(*level); err != nil {
		return f, fmt.Errorf("%s: %w", named("log-level", "LOG_LEVEL", *level), err)
	}
	if !fs.Changed("metrics-addr") {
		if _, set := lookupEnv("METRICS_ADDR"); !set {
			f.MetricsAddr = ":" + strconv.Itoa(int(*monitoring))
		}
	}
	if *kcMode <= 0 || *kcMode > 0o777 {
		return f, fmt.Errorf("%s: want a file mode, 0 to 0777", named("kubeconfig-mode", "KUBECONFIG_MODE", fmt.Sprintf("%#o", *kcMode)))
	}
	c.KubeconfigMode = os.FileMode(*kcMode)
	for _, a := range []struct{ flag, variable, addr string }{
		{"health-addr", "HEALTH_ADDR", f.HealthAddr}, {"metrics-addr", "METRICS_ADDR", f.MetricsAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); a.addr != "" && err != nil {
			return f, fmt.Errorf("%s: want host:port", named(a.flag, a.variable, a.addr))
		}
	}
	if r.InitExitCode < 0 || r.InitExitCode > 255 {
		return f, fmt.Errorf("%s: want an exit code, 0 to 255", named("repair-init-container-exit-code", "REPAIR_INIT_CONTAINER_EXIT_CODE", strconv.Itoa(int(r.InitExitCode))))
	}
	if err := r.Validate(); err != nil {
		return f, err
	}
	c.Entry = cni.Config{
		LogLevel: *level, AgentRunDir: c.AgentRunDir, ExcludeNamespaces: splitList(*excluded),
		PodNamespace: *podNS, NativeNFTables: *nft,
	}
	c.Entry.Type = PluginType
	return f, nil
}

// istioStringOnly and istioBoolOnly are Istio's install-cni flags that
// change nothing here (their variables are reported by pkg/compat): taken,
// and logged when given.
var (
	istioStringOnly = []string{"cni-conf-name", "cni-network-config", "cni-network-config-file", "istio-owned-cni-config-filename", "ztunnel-uds-address"}
	istioBoolOnly   = []string{"istio-owned-cni-config", "cni-conf-group-read", "ambient-enabled", "enable-ambient-detection-retry"}
)

// envDefaults reads flag defaults from the environment, keeping every error.
type envDefaults struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (e *envDefaults) str(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

// boolean accepts what strconv.ParseBool does (1, t, true, 0, f, false,
// ...); unset or empty is def.
func (e *envDefaults) boolean(name string, def bool) bool {
	v, _ := e.lookup(name)
	if strings.TrimSpace(v) == "" {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want true or false", name, v))
		return def
	}
	return b
}

// port accepts a TCP port number; unset or empty is def.
func (e *envDefaults) port(name string, def uint16) uint16 {
	v, _ := e.lookup(name)
	if strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
	if err != nil || n == 0 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a port number", name, v))
		return def
	}
	return uint16(n)
}

// integer accepts a number in Go's notations (0600 and 0o600 are octal, as
// Istio's installer reads them); unset or empty is def.
func (e *envDefaults) integer(name string, def int) int {
	v, _ := e.lookup(name)
	if strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 32)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a number", name, v))
		return def
	}
	return int(n)
}

// exitCode accepts a process exit code; unset or empty is def.
func (e *envDefaults) exitCode(name string, def int32) int32 {
	v, _ := e.lookup(name)
	if strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 || n > 255 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want an exit code, 0 to 255", name, v))
		return def
	}
	return int32(n)
}

// splitList splits a comma list, dropping spaces and empty items.
func splitList(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
