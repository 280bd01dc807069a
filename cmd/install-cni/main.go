// Command install-cni is the CNI node agent's main process (the istio-cni
// DaemonSet): it installs the plugin on the node and keeps it chained.
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

	"github.com/skiff-mesh/skiff/pkg/cni/install"
)

func main() {
	f, err := install.ParseFlags(os.Args[1:], os.LookupEnv, os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "install-cni:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := install.Run(ctx, f, log); err != nil {
		fmt.Fprintln(os.Stderr, "install-cni:", err)
		os.Exit(1)
	}
}
