package cli

import (
	"context"
	"io"

	capturecli "github.com/skiff-mesh/skiff/pkg/capture/cli"
)

// istioIptables is "pilot-agent istio-iptables": the same command line as
// cmd/istio-iptables.
func istioIptables(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return capturecli.Main(ctx, args, stdout, stderr)
}
