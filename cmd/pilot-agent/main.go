// Command pilot-agent is the sidecar agent (Istio's pilot-agent): it
// supervises the proxy and serves it certificates, xDS, DNS and health.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiff-mesh/skiff/pkg/agent/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	fwd := make(chan os.Signal, 4)
	signal.Notify(fwd, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	code := cli.Main(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr, fwd)
	stop()
	os.Exit(code)
}
