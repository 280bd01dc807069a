// Command xdsload measures istiod's xDS performance: it writes a mesh of
// many services, starts istiod on it, connects many sidecar-like ADS
// clients on loopback and times pushes after config and endpoint changes,
// while sampling istiod's RSS and CPU.
//
//	go run ./tools/xdsload --istiod bin/istiod --services 1000 --clients 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.istiod, "istiod", "bin/istiod", "istiod binary")
	flag.IntVar(&cfg.services, "services", 1000, "services in the mesh")
	flag.IntVar(&cfg.endpoints, "endpoints", 5, "endpoints per service")
	flag.IntVar(&cfg.clients, "clients", 1000, "connected sidecar clients")
	flag.IntVar(&cfg.fullPushes, "full-pushes", 5, "full pushes to time")
	flag.IntVar(&cfg.edsChanges, "eds-changes", 50, "endpoint changes to time")
	flag.BoolVar(&cfg.edsDebounce, "eds-debounce", true, "run istiod with EDS debounce (Istio's default)")
	flag.BoolVar(&cfg.delta, "delta", false, "clients use delta xDS (ACKs without names) instead of state of the world")
	flag.IntVar(&cfg.pushConcurrency, "push-concurrency", 100, "istiod's --push-concurrency (Istio's PILOT_PUSH_THROTTLE)")
	flag.StringVar(&cfg.logLevel, "istiod-log-level", "warn", "istiod's --log-level")
	flag.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "longest wait for one convergence")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsload:", err)
		os.Exit(1)
	}
	res.print(os.Stdout, cfg)
}
