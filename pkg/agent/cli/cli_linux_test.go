package cli

import (
	"strings"
	"testing"
)

func TestIstioIptablesSubcommand(t *testing.T) {
	code, out, errs := run("istio-iptables", "--dry-run", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-b", "*")
	if code != 0 || !strings.Contains(out, "-A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
		t.Errorf("istio-iptables --dry-run: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := run("istio-iptables", "-p", "70000"); code != 2 || !strings.Contains(errs, "70000") {
		t.Errorf("bad flag: %d %q", code, errs)
	}
}

// TestIstioInitArguments runs istio-iptables with the logging flag Istio's
// istio-init container passes.
func TestIstioInitArguments(t *testing.T) {
	code, out, errs := run("istio-iptables", "--dry-run", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
		"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info")
	if code != 0 || !strings.Contains(out, "ISTIO_REDIRECT") {
		t.Errorf("istio-init's arguments: %d\n%s\n%s", code, out, errs)
	}
}
