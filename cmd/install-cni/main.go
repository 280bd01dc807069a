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
	"github.com/skiff-mesh/skiff/pkg/compat"
	"github.com/skiff-mesh/skiff/pkg/logflags"
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
	log := slog.New(logflags.NewHandler(os.Stderr, f.LogLevel, f.LogJSON))
	compat.Report(log, compat.InstallCNI, f.Unapplied, os.Environ())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := install.Run(ctx, f, log); err != nil {
		fmt.Fprintln(os.Stderr, "install-cni:", err)
		os.Exit(1)
	}
}
