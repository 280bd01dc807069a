package install

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"
)

// Run installs and guards the plugin and serves health and metrics until ctx
// ends, then uninstalls.
func Run(ctx context.Context, cfg Config, healthAddr, metricsAddr string, log *slog.Logger) error {
	in, err := New(cfg, log)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return in.Run(ctx) })
	if healthAddr != "" {
		g.Go(func() error { return Serve(ctx, healthAddr, in.HealthHandler(), log) })
	}
	if metricsAddr != "" {
		g.Go(func() error { return Serve(ctx, metricsAddr, in.MetricsHandler(), log) })
	}
	return g.Wait()
}
