// Command istiod is Skiff's lean istiod: services and Istio configuration
// from YAML files (--config-dir) or Kubernetes, served as xDS on 15010.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/compat"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/logflags"
	"github.com/skiff-mesh/skiff/pkg/memory"
	"github.com/skiff-mesh/skiff/pkg/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		os.Exit(version.Command("pilot-discovery", os.Args[2:], os.Stdout, os.Stderr))
	}
	f, err := istiod.ParseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "istiod:", err)
		os.Exit(2)
	}
	log := slog.New(logflags.NewHandler(os.Stderr, f.LogLevel, f.LogJSON))
	compat.Report(log, compat.PilotDiscovery, f.Unapplied, os.Environ())
	lc, err := leader.ConfigFromEnv(os.LookupEnv, f.Security.Namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istiod:", err)
		os.Exit(2)
	}
	wp, err := istiod.WebhookPatchFromEnv(os.LookupEnv, f.Security.Namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istiod:", err)
		os.Exit(2)
	}
	// One set of API server clients for all of istiod: one connection and
	// one rate limit, as Istio's istiod has.
	if f.Config.Clients, err = istiod.NewKubeClients(f.Config); err != nil {
		log.Error("istiod kubernetes client failed", "err", err)
		os.Exit(1)
	}
	elector, err := istiod.NewElector(f.Config, lc, log)
	if err != nil {
		log.Error("istiod leader election failed", "err", err)
		os.Exit(1)
	}
	f.Security.Leader = elector
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mw, err := istiod.WatchMesh(ctx, f.Config, log)
	if err != nil {
		log.Error("istiod mesh config failed", "err", err)
		os.Exit(1)
	}
	if td := mw.Mesh().GetTrustDomain(); !f.TrustDomainGiven && td != "" {
		f.Security.TrustDomain = td // the CA issues identities in the mesh's trust domain, as Istio's
	}
	opts, authority, err := istiod.SecurityOptions(ctx, f.Config, f.Security, f.SecureGRPCAddr, log)
	if err != nil {
		log.Error("istiod CA failed", "err", err)
		os.Exit(1)
	}
	opts = append(opts, istiod.WithMesh(mw))
	if memory.Apply(os.Environ(), memory.Defaults{GCPercent: istiod.GCPercent}, log).Release {
		opts = append(opts, istiod.WithHeapRelease())
	}
	d, err := istiod.New(ctx, f.Config, log, opts...)
	if err != nil {
		log.Error("istiod failed", "err", err)
		os.Exit(1)
	}
	// The webhooks analyze against istiod's registry and inject with its
	// mesh config instead of watching the cluster a second time.
	f.Webhooks.Inputs, f.Webhooks.Synced, f.Webhooks.Mesh = d.Inputs, d.Synced, d.Mesh()
	if err := istiod.StartWebhooks(ctx, f.Config, f.Webhooks, authority, log); err != nil {
		log.Error("istiod webhooks failed", "err", err)
		os.Exit(1)
	}
	if err := istiod.StartWebhookPatcher(ctx, f.Config, f.Webhooks, wp, authority, log); err != nil {
		log.Error("istiod webhook patcher failed", "err", err)
		os.Exit(1)
	}
	err = d.Serve(ctx)
	stop()
	elector.Wait() // the singletons have stopped and their leases are released
	if err != nil {
		log.Error("istiod failed", "err", err)
		os.Exit(1)
	}
}
