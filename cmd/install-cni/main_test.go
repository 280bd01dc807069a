package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMRemovesEverything runs the real binary against a directory tree
// and stops it as the kubelet would.
func TestSIGTERMRemovesEverything(t *testing.T) {
	d := t.TempDir()
	bin := filepath.Join(d, "install-cni")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	for _, dir := range []string{"net.d", "bin", "sa"} {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"net.d/10-k8s.conflist": `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"}]}`,
		"plugin":                "plugin", "sa/token": "tok", "sa/ca.crt": "ca",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	health := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--mounted-cni-net-dir", filepath.Join(d, "net.d"), "--cni-bin-dir", filepath.Join(d, "bin"),
		"--cni-agent-run-dir", filepath.Join(d, "run"), "--plugin-binary", filepath.Join(d, "plugin"),
		"--token", filepath.Join(d, "sa/token"), "--ca", filepath.Join(d, "sa/ca.crt"), "--kube-host", "10.0.0.1",
		"--health-addr", health, "--metrics-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	conf := filepath.Join(d, "net.d/10-k8s.conflist")
	if b, _ := os.ReadFile(conf); !strings.Contains(string(b), `"istio-cni"`) {
		t.Fatalf("not chained:\n%s", b)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if b, _ := os.ReadFile(conf); strings.Contains(string(b), `"istio-cni"`) {
		t.Errorf("entry left after SIGTERM:\n%s", b)
	}
	for _, p := range []string{"bin/istio-cni", "run/istio-cni-kubeconfig"} {
		if _, err := os.Stat(filepath.Join(d, p)); !os.IsNotExist(err) {
			t.Errorf("%s left after SIGTERM", p)
		}
	}
}
