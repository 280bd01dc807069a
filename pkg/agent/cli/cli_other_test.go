//go:build !linux

package cli

import (
	"strings"
	"testing"
)

func TestIstioIptablesOnlyOnLinux(t *testing.T) {
	if code, _, errs := run("istio-iptables", "--dry-run"); code != 1 || !strings.Contains(errs, "only on Linux") {
		t.Errorf("istio-iptables off Linux: %d %q", code, errs)
	}
}
