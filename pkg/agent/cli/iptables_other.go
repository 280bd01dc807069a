//go:build !linux

package cli

import (
	"context"
	"fmt"
	"io"
)

// istioIptables refuses off Linux: traffic capture is netfilter's, so the
// capture packages are left out of the agent there.
func istioIptables(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pilot-agent: istio-iptables runs only on Linux")
	return 1
}
