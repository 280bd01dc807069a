package install

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/logsink"
	"github.com/skiff-mesh/skiff/pkg/httpserver"
)

// shutdownGrace is how long open health and metrics requests get at exit.
const shutdownGrace = 2 * time.Second

// Run installs and guards the plugin, runs the race repair controller when
// it is enabled and the cache of the node's pods the plugin asks first, and
// serves health, metrics and the plugin's log socket until ctx ends, then
// uninstalls. It listens before installing, so a port in use
// stops it with nothing changed on the node, and logs each bound address.
func Run(ctx context.Context, f Flags, log *slog.Logger) error {
	in, err := New(f.Config, log)
	if err != nil {
		return err
	}
	repaired := newRepairedCounter()
	rc, err := newRepair(f, log, repaired)
	if err != nil {
		return err
	}
	pc, err := newPodCache(f, log)
	if err != nil {
		return err
	}
	type server struct {
		name string
		ln   net.Listener
		h    http.Handler
	}
	var servers []server
	defer func() {
		for _, s := range servers {
			s.ln.Close() // no-op once served: Serve closes it
		}
	}()
	for _, s := range []struct {
		name, addr string
		h          http.Handler
	}{{"health", f.HealthAddr, in.HealthHandler()}, {"metrics", f.MetricsAddr, in.MetricsHandler(repaired)}} {
		if s.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("%s server: listen %s: %w", s.name, s.addr, err)
		}
		servers = append(servers, server{s.name, ln, s.h})
		log.Info("serving", "server", s.name, "addr", ln.Addr().String())
	}
	if dir := f.Config.AgentRunDir; dir != "" {
		// The plugin's records, printed in this log (pluginlog, logsink).
		ln, err := logsink.Listen(dir)
		if err != nil {
			return err
		}
		servers = append(servers, server{"plugin logs", ln, logsink.Handler(log)})
		log.Info("serving", "server", "plugin logs", "addr", ln.Addr().String())
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return in.Run(ctx) })
	if rc != nil {
		g.Go(func() error { return rc.Run(ctx) })
	}
	if pc != nil {
		g.Go(func() error { return pc.Publish(ctx, filepath.Join(f.Config.AgentRunDir, cni.PodCacheDir)) })
	}
	for _, s := range servers {
		g.Go(func() error {
			return httpserver.Serve(ctx, &http.Server{Handler: s.h, ReadHeaderTimeout: 5 * time.Second}, s.ln, shutdownGrace)
		})
	}
	return g.Wait()
}
