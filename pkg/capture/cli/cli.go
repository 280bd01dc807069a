// Package cli is the istio-iptables command: argument and environment
// binding, logging, and exit codes, shared by cmd/istio-iptables and the
// agent's "istio-iptables" subcommand.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/capture"
	"github.com/skiff-mesh/skiff/pkg/compat"
	"github.com/skiff-mesh/skiff/pkg/logflags"
)

// Exit codes, as Istio's istio-iptables uses them.
const (
	ExitOK         = 0
	ExitFailure    = 1
	ExitUsage      = 2
	ExitValidation = 126
)

// Main runs istio-iptables with args and the process environment and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := capture.Parse(args, capture.OSEnvironment(), stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return ExitOK
	}
	var usage *capture.UsageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "istio-iptables: %v\n", err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "istio-iptables: %v\n", err)
		return ExitFailure
	}
	log := slog.New(logflags.NewHandler(stderr, cfg.LogLevel, cfg.LogJSON)).With("component", "istio-iptables")
	compat.Report(log, compat.IstioIptables, cfg.Unapplied, nil)
	if err := capture.Run(ctx, cfg, log, capture.Env{Out: stdout}); err != nil {
		log.Error("failed", "err", err)
		if errors.Is(err, capture.ErrValidation) {
			return ExitValidation
		}
		return ExitFailure
	}
	return ExitOK
}
