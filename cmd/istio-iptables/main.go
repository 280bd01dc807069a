// Command istio-iptables installs the rules that send a pod's traffic through
// its sidecar proxy. It takes Istio's flags and environment variables.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiff-mesh/skiff/pkg/capture/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
