// Command xdsload measures istiod's xDS performance: it writes a mesh of
// many services, starts istiod on it, connects many sidecar-like ADS
// clients on loopback and times pushes after config and endpoint changes,
// while sampling istiod's RSS and CPU.
//
//	go run ./tools/xdsload --istiod bin/istiod --services 1000 --clients 1000
//
// The mesh is a directory Skiff's istiod watches (--source files), or a local
// kube-apiserver (--source kube), on which --control-plane istio runs Istio
// 1.31's own pilot-discovery instead, side by side.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.istiod, "istiod", "bin/istiod", "istiod binary")
	flag.StringVar(&cfg.controlPlane, "control-plane", planeSkiff, "skiff: --istiod; istio: Istio 1.31's own pilot-discovery, built by pkg/istiobin (needs --source kube)")
	flag.StringVar(&cfg.source, "source", sourceFiles, "where the mesh lives: files (a directory Skiff's istiod watches) or kube (a local kube-apiserver, as in a cluster)")
	flag.IntVar(&cfg.services, "services", 1000, "services in the mesh")
	flag.IntVar(&cfg.endpoints, "endpoints", 5, "endpoints per service")
	namespaces := flag.Int("namespaces", 1, "namespaces the services, their pods and the sidecars are spread over (service i in namespace i mod n; the sidecars of connection c, which carries one namespace's certificate, in namespace c mod n: sidecar i's with one stream a connection); 1: all in \"bench\"")
	clients := flag.String("clients", "1000", "connected sidecar clients; a comma-separated list (250,1000,4000) runs istiod once per count and adds a scaling table")
	flag.IntVar(&cfg.streamsPerConn, "streams-per-conn", 1, "ADS streams multiplexed over one gRPC connection (Envoy: 1; more when file descriptors run short)")
	flag.IntVar(&cfg.fullPushes, "full-pushes", 5, "full pushes to time")
	flag.IntVar(&cfg.edsChanges, "eds-changes", 50, "endpoint changes to time")
	flag.BoolVar(&cfg.edsDebounce, "eds-debounce", true, "run istiod with EDS debounce (Istio's default)")
	flag.BoolVar(&cfg.delta, "delta", true, "clients use delta xDS (ACKs without names), as Envoy does under Istio's agent and Skiff's (ISTIO_DELTA_XDS); false: state of the world")
	flag.BoolVar(&cfg.agentStreams, "agent-streams", false, "each sidecar also keeps a NameTable stream of its own beside its ADS stream, on the same connection (Skiff's agent before it moved the NameTable onto Envoy's stream; implies --nds-on-ads=false unless given)")
	flag.BoolVar(&cfg.nodeMetadata, "node-metadata", true, "each sidecar's node carries the metadata an Istio agent sends for an injected pod (labels, annotations, proxy config); false: a node id alone, as before 2026-12-06")
	flag.BoolVar(&cfg.ndsOnADS, "nds-on-ads", true, "each sidecar also subscribes to the NameTable on its ADS stream, as Istio's and Skiff's agents do on Envoy's")
	flag.BoolVar(&cfg.tls, "tls", true, "connect to istiod's TLS port (15012) with a workload certificate, as sidecars do; false: the plaintext port (15010)")
	flag.BoolVar(&cfg.pods, "pods", false, "write the pod behind each endpoint, injected with the chart's defaults and running, as a cluster holds them; the endpoints name their pods")
	flag.IntVar(&cfg.apps, "apps", 0, "with --node-metadata: the sidecars are replicas of this many apps (svc-0 ...), sharing their labels and inbound configuration; 0: every sidecar its own app, up to 1000 (the least sharing)")
	flag.IntVar(&cfg.reconnects, "reconnects", 0, "delta clients: times every client ends its stream and opens a new one that brings the versions it holds (initial_resource_versions), as Envoy's streams do when istiod restarts; timed after the other changes")
	flag.IntVar(&cfg.rolloutSteps, "rollout-steps", 0, "with --pods: rollout steps to time, each a new pod written and then added to its service's EndpointSlice, as a Deployment's rollout does")
	flag.IntVar(&cfg.pushConcurrency, "push-concurrency", 100, "istiod's --push-concurrency (Istio's PILOT_PUSH_THROTTLE)")
	flag.StringVar(&cfg.logLevel, "istiod-log-level", "warn", "istiod's --log-level")
	flag.Func("istiod-env", "KEY=VALUE added to istiod's environment (repeatable), e.g. GOMEMLIMIT=100MiB", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q: want KEY=VALUE", v)
		}
		cfg.env = append(cfg.env, v)
		return nil
	})
	flag.Func("istiod-arg", "an extra istiod flag (repeatable), e.g. --istiod-arg=--keepaliveInterval=10m", func(v string) error {
		cfg.args = append(cfg.args, v)
		return nil
	})
	flag.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "longest wait for one convergence")
	flag.DurationVar(&cfg.rest, "rest", 5*time.Second, "quiet time after the last change before istiod's RSS at rest is read (0: not read)")
	flag.StringVar(&cfg.profiles, "profiles", "", "directory for istiod's heap, goroutine and memstats profiles at rest (one set per client count)")
	flag.Parse()
	ndsGiven := false
	flag.Visit(func(f *flag.Flag) { ndsGiven = ndsGiven || f.Name == "nds-on-ads" })
	if cfg.agentStreams && !ndsGiven {
		cfg.ndsOnADS = false
	}
	if cfg.apps < 0 || cfg.apps > cfg.services {
		fmt.Fprintf(os.Stderr, "xdsload: --apps %d: must be 0 to --services (%d): an app is a service's workload\n", cfg.apps, cfg.services)
		os.Exit(2)
	}
	if cfg.reconnects > 0 && !cfg.delta {
		fmt.Fprintln(os.Stderr, "xdsload: --reconnects needs --delta (state-of-the-world streams bring no versions)")
		os.Exit(2)
	}
	if cfg.rolloutSteps > 0 && !cfg.pods {
		fmt.Fprintln(os.Stderr, "xdsload: --rollout-steps needs --pods")
		os.Exit(2)
	}
	counts, err := parseCounts(*clients)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsload: --clients:", err)
		os.Exit(2)
	}
	if *namespaces < 1 || *namespaces > cfg.services {
		fmt.Fprintf(os.Stderr, "xdsload: --namespaces %d: must be 1 to --services (%d)\n", *namespaces, cfg.services)
		os.Exit(2)
	}
	cfg.spread = spread(*namespaces)
	if cfg.streamsPerConn < 1 {
		fmt.Fprintf(os.Stderr, "xdsload: --streams-per-conn %d: must be at least 1\n", cfg.streamsPerConn)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	warnFiles(log, counts, cfg.streamsPerConn)
	var all []*results
	for _, n := range counts {
		cfg.clients = n
		res, err := run(ctx, cfg, log)
		if err != nil {
			fmt.Fprintf(os.Stderr, "xdsload: %d clients: %v\n", n, err)
			os.Exit(1)
		}
		res.print(os.Stdout, cfg)
		fmt.Fprintln(os.Stdout)
		all = append(all, res)
	}
	printCurve(os.Stdout, cfg, all)
}

// parseCounts reads "250,1000,4000".
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive client counts separated by commas", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// warnFiles logs when the file descriptor limit cannot hold the largest
// run's connections (istiod's side needs as many as the load generator's).
func warnFiles(log *slog.Logger, counts []int, perConn int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	need := uint64(slices.Max(counts)/perConn + 256)
	if need > lim.Cur {
		log.Warn("file descriptor limit too low for one connection per stream: raise ulimit -n or --streams-per-conn",
			"need", need, "limit", lim.Cur)
	}
}
