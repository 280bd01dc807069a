// Package cli is the pilot-agent command line: "proxy sidecar|router",
// "request", "wait", "version" and "istio-iptables", as Istio's agent has them.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/agent"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/compat"
	"github.com/skiff-mesh/skiff/pkg/logflags"
	"github.com/skiff-mesh/skiff/pkg/memory"
	"github.com/skiff-mesh/skiff/pkg/version"
)

const usage = `usage: pilot-agent COMMAND
  proxy [sidecar|router]      run the agent (and the proxy)
  request METHOD PATH [BODY]  send a request to the proxy's admin API
  wait                        wait until the agent is ready
  version                     print the version
  istio-iptables [FLAGS]      install the traffic capture rules (Linux)
`

// Main runs pilot-agent with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "proxy":
		return proxy(ctx, args[1:], environ, stdout, stderr, signals)
	case "request":
		return request(args[1:], stdout, stderr)
	case "wait":
		return wait(args[1:], stderr)
	case "version":
		return version.Command("pilot-agent", args[1:], stdout, stderr)
	case "istio-iptables":
		return istioIptables(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "pilot-agent: unknown command %q\n%s", args[0], usage)
	return 2
}

// proxyFlags are the flags of Istio's "pilot-agent proxy" that Skiff accepts
// without acting on them: its configuration comes from the environment
// (PROXY_CONFIG, the injected variables), as it does in Istio too.
var proxyFlags = []struct{ name, value, usage string }{
	{"domain", "", "the pod's DNS domain, NS.svc.CLUSTER_DOMAIN: the DNS proxy's cluster domain"},
	{"meshConfig", "./etc/istio/config/mesh", "mesh configuration file (accepted for compatibility: PROXY_CONFIG is read)"},
	{"tokenManagerPlugin", "", "accepted for compatibility"},
	{"serviceCluster", "istio-proxy", "accepted for compatibility (deprecated in Istio)"},
	{"proxyLogLevel", "warning", "the proxy's log level (accepted for compatibility)"},
	{"proxyComponentLogLevel", "", "accepted for compatibility"},
	{"templateFile", "", "accepted for compatibility"},
	{"outlierLogPath", "", "accepted for compatibility"},
}

// proxyArgs is the parsed "proxy" command line.
type proxyArgs struct {
	fs          *pflag.FlagSet
	logs        *logflags.Flags
	concurrency *int
	profiling   *bool
}

func proxyFlagSet(stderr io.Writer) *proxyArgs {
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	a := &proxyArgs{fs: fs, logs: logflags.Register(fs, "default:info")}
	for _, f := range proxyFlags {
		fs.String(f.name, f.value, f.usage)
	}
	fs.Int("stsPort", 0, "accepted for compatibility (no STS server)")
	a.profiling = fs.Bool("profiling", true, "serve Go's pprof profiles at :15020/debug/pprof/ to loopback clients")
	a.concurrency = fs.Int("concurrency", 0, "the proxy's worker threads; above 0 it overrides PROXY_CONFIG's concurrency")
	return a
}

func proxy(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	a := proxyFlagSet(stderr)
	fs, logs, concurrency := a.fs, a.logs, a.concurrency
	if err := fs.Parse(args); err != nil {
		return parseFailed(stderr, "proxy", err)
	}
	typ := "sidecar"
	if fs.NArg() > 0 {
		typ = fs.Arg(0)
	}
	h, err := logs.Handler(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent proxy: %v\n", err)
		return 2
	}
	log := slog.New(h).With("component", "pilot-agent")
	cfg, err := config.Load(environ, typ)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 2
	}
	compat.Report(log, compat.PilotAgent, unapplied(fs, logs), withProxyMetadata(environ, cfg))
	cfg.ClusterDomain = ClusterDomain(fs.Lookup("domain").Value.String())
	cfg.Profiling = *a.profiling
	if *concurrency > 0 {
		c := int32(*concurrency)
		cfg.Proxy.Concurrency = &c
	}
	if err := cfg.ReadPodInfo(); err != nil {
		log.Warn("pod labels and annotations not read; using the environment's", "err", err)
	}
	plan := memory.Apply(environ, memory.Defaults{}, log)
	err = agent.Run(ctx, cfg, agent.Options{Stdout: stdout, Stderr: stderr, Signals: signals, ReleaseHeap: plan.Release}, log)
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	return 0
}

// ClusterDomain is the cluster's DNS domain in pilot-agent's --domain,
// which Istio's templates set to NS.svc.DOMAIN: what follows ".svc.", or
// "" (the default, cluster.local) when the value has no such part.
func ClusterDomain(domain string) string {
	if _, d, ok := strings.Cut(strings.Trim(domain, "."), ".svc."); ok && d != "" {
		return d
	}
	return ""
}

// unapplied lists the compatibility flags given on the command line.
func unapplied(fs *pflag.FlagSet, logs *logflags.Flags) []string {
	out := logs.Unapplied()
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "concurrency" && f.Name != "domain" && f.Name != "profiling" && !strings.HasPrefix(f.Name, "log_") {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// withProxyMetadata is environ with PROXY_CONFIG's proxyMetadata entries
// after it: they act as variables too.
func withProxyMetadata(environ []string, cfg *config.Config) []string {
	out := slices.Clip(environ)
	for _, k := range slices.Sorted(maps.Keys(cfg.Proxy.GetProxyMetadata())) {
		out = append(out, k+"="+cfg.Proxy.GetProxyMetadata()[k])
	}
	return out
}

func requestFlagSet(stderr io.Writer) (*pflag.FlagSet, *int) {
	fs := pflag.NewFlagSet("request", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("debug-port", 15000, "the proxy's admin port")
	logflags.Register(fs, "default:info")
	return fs, port
}

func request(args []string, stdout, stderr io.Writer) int {
	fs, port := requestFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(stderr, "request", err)
	}
	if fs.NArg() < 2 {
		fmt.Fprintln(stderr, "usage: pilot-agent request METHOD PATH [BODY]")
		return 2
	}
	path := strings.TrimPrefix(fs.Arg(1), "/")
	var body io.Reader
	if fs.NArg() > 2 {
		body = strings.NewReader(fs.Arg(2))
	}
	req, err := http.NewRequest(strings.ToUpper(fs.Arg(0)), fmt.Sprintf("http://127.0.0.1:%d/%s", *port, path), body)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 2
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(stdout, resp.Body)
	if resp.StatusCode >= 400 {
		fmt.Fprintf(stderr, "pilot-agent: %s\n", resp.Status)
		return 1
	}
	return 0
}

// waitArgs is the parsed "wait" command line.
type waitArgs struct {
	fs                       *pflag.FlagSet
	timeout, period, request *int
	url                      *string
}

func waitFlagSet(stderr io.Writer) *waitArgs {
	fs := pflag.NewFlagSet("wait", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	a := &waitArgs{fs: fs}
	a.timeout = fs.Int("timeoutSeconds", 60, "how long to wait")
	a.period = fs.Int("periodMillis", 500, "time between attempts")
	a.request = fs.Int("requestTimeoutMillis", 500, "how long one attempt waits for its answer")
	a.url = fs.String("url", "http://localhost:15021/healthz/ready", "the readiness URL")
	logflags.Register(fs, "default:info")
	return a
}

func wait(args []string, stderr io.Writer) int {
	a := waitFlagSet(stderr)
	fs, timeout, period, url := a.fs, a.timeout, a.period, a.url
	if err := fs.Parse(args); err != nil {
		return parseFailed(stderr, "wait", err)
	}
	if *a.request <= 0 {
		fmt.Fprintf(stderr, "pilot-agent wait: --requestTimeoutMillis %d: want a positive number\n", *a.request)
		return 2
	}
	client := &http.Client{Timeout: time.Duration(*a.request) * time.Millisecond}
	deadline := time.Now().Add(time.Duration(*timeout) * time.Second)
	for {
		resp, err := client.Get(*url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return 0
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "pilot-agent: not ready after %ds (%s)\n", *timeout, *url)
			return 1
		}
		time.Sleep(time.Duration(*period) * time.Millisecond)
	}
}

// Check parses a pilot-agent command line (without the program name) as
// Main would, without running it: for the "proxy", "request" and "wait"
// commands. It returns the parse error Main would print.
func Check(args []string) error {
	if len(args) == 0 {
		return errors.New("no command")
	}
	var fs *pflag.FlagSet
	switch args[0] {
	case "proxy":
		fs = proxyFlagSet(io.Discard).fs
	case "request":
		fs, _ = requestFlagSet(io.Discard)
	case "wait":
		fs = waitFlagSet(io.Discard).fs
	default:
		return fmt.Errorf("command %q: Check knows proxy, request and wait", args[0])
	}
	return fs.Parse(args[1:])
}

// parseFailed reports a command-line error and returns the exit code: 0
// for --help, else 2.
func parseFailed(stderr io.Writer, cmd string, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "pilot-agent %s: %v\n", cmd, err)
	return 2
}
