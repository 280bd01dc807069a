package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// serving passes the child's stderr through and picks out the address each
// server logs once it listens ("msg=serving server=health addr=...").
type serving struct {
	mu    sync.Mutex
	buf   []byte
	addrs map[string]string
}

var servingLine = regexp.MustCompile(`msg=serving .*server=(\w+) addr=(\S+)`)

func (s *serving) Write(p []byte) (int, error) {
	os.Stderr.Write(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if m := servingLine.FindSubmatch(s.buf[:i]); m != nil {
			s.addrs[string(m[1])] = string(m[2])
		}
		s.buf = s.buf[i+1:]
	}
}

func (s *serving) addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[name]
}

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
		"plugin":                "plugin", "istio-cni-lookup": "lookup", "sa/token": "tok", "sa/ca.crt": "ca",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "--mounted-cni-net-dir", filepath.Join(d, "net.d"), "--cni-bin-dir", filepath.Join(d, "bin"),
		"--cni-agent-run-dir", filepath.Join(d, "run"), "--plugin-binary", filepath.Join(d, "plugin"),
		"--token", filepath.Join(d, "sa/token"), "--ca", filepath.Join(d, "sa/ca.crt"), "--kube-host", "10.0.0.1",
		"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	logs := &serving{addrs: map[string]string{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The ports are the kernel's choice: the binary logs what it bound.
	polltest.Until(t, "the health server's address in the log", func() bool { return logs.addr("health") != "" })
	health := logs.addr("health")
	client := &http.Client{Timeout: 5 * time.Second}
	polltest.Until(t, "/readyz", func() bool {
		resp, err := client.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if resp, err := client.Get("http://" + logs.addr("metrics") + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("metrics server: %v %v", resp, err)
	} else {
		resp.Body.Close()
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
	if b, _ := os.ReadFile(conf); string(b) != files["net.d/10-k8s.conflist"] {
		t.Errorf("the conflist is not as found after SIGTERM:\n%s", b)
	}
	for _, p := range []string{"bin/istio-cni", "bin/istio-cni-lookup", "run/istio-cni-kubeconfig"} {
		if _, err := os.Stat(filepath.Join(d, p)); !os.IsNotExist(err) {
			t.Errorf("%s left after SIGTERM", p)
		}
	}
}
