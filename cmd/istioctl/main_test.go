package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinaryKubeInject builds istioctl and injects the bookinfo example.
func TestBinaryKubeInject(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "istioctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "kube-inject", "-f", "../../pkg/istioctl/testdata/bookinfo.yaml").Output()
	if err != nil {
		t.Fatalf("kube-inject: %v", err)
	}
	if !strings.Contains(string(out), "name: istio-proxy") || !strings.Contains(string(out), "- istio-iptables") {
		t.Errorf("output not injected:\n%s", out)
	}
	if err := exec.Command(bin, "no-such-command").Run(); err == nil {
		t.Error("unknown command exited 0")
	}
}
