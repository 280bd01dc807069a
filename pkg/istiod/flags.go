package istiod

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flags is the command line: the Config plus process settings.
type Flags struct {
	// Config is istiod's configuration.
	Config Config
	// LogLevel is the slog level (debug, info, warn, error).
	LogLevel slog.Level
	// SecureGRPCAddr is where the TLS server would listen (":15012");
	// istiod serves it once the CA provides credentials.
	SecureGRPCAddr string
	// Security configures the CA.
	Security Security
	// Webhooks configures the admission webhooks.
	Webhooks Webhooks
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
	f.Security.register(fs)
	f.Webhooks.register(fs)
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := f.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return f, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
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
	if v := getenv("PILOT_PUSH_THROTTLE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("PILOT_PUSH_THROTTLE=%q: want a positive number", v)
		}
		c.PushConcurrency = n
	}
	return nil
}
