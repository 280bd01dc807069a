package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
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
		"plugin":                "plugin", "sa/token": "tok", "sa/ca.crt": "ca",
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
	for _, p := range []string{"bin/istio-cni", "run/istio-cni-kubeconfig"} {
		if _, err := os.Stat(filepath.Join(d, p)); !os.IsNotExist(err) {
			t.Errorf("%s left after SIGTERM", p)
		}
	}
}

// TestRepairDeletesABrokenPod runs the binary as the chart does, with the
// race repair on (Istio's variables) against a real API server: a pod of
// its node whose istio-validation init container exited 126 is deleted.
func TestRepairDeletesABrokenPod(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
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
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"net.d/10-k8s.conflist": `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"}]}`,
		"plugin":                "plugin", "sa/token": env.Config.BearerToken, "sa/ca.crt": string(ca),
	} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	const ns, node = "repair-e2e", "node-repair-e2e"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Annotations: map[string]string{"sidecar.istio.io/status": "{}"}},
		Spec: corev1.PodSpec{
			NodeName:       node,
			InitContainers: []corev1.Container{{Name: "istio-validation", Image: "proxyv2"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the kubelet reports when validation found no capture.
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: "istio-validation", Image: "proxyv2", ImageID: "proxyv2",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 126, Reason: "Error"}},
	}}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "--mounted-cni-net-dir", filepath.Join(d, "net.d"), "--cni-bin-dir", filepath.Join(d, "bin"),
		"--cni-agent-run-dir", filepath.Join(d, "run"), "--plugin-binary", filepath.Join(d, "plugin"),
		"--token", filepath.Join(d, "sa/token"), "--ca", filepath.Join(d, "sa/ca.crt"),
		"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port(),
		"REPAIR_ENABLED=true", "REPAIR_DELETE_PODS=true", "REPAIR_LABEL_PODS=false", "REPAIR_REPAIR_PODS=false",
		"REPAIR_NODE_NAME="+node, "REPAIR_INIT_CONTAINER_NAME=istio-validation",
		"REPAIR_BROKEN_POD_LABEL_KEY=cni.istio.io/uninitialized", "REPAIR_BROKEN_POD_LABEL_VALUE=true")
	logs := &serving{addrs: map[string]string{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	polltest.Until(t, "the broken pod deleted", func() bool {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "broken", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
	})
	polltest.Until(t, "the metrics server's address in the log", func() bool { return logs.addr("metrics") != "" })
	client := &http.Client{Timeout: 5 * time.Second}
	polltest.Until(t, "the repair counted", func() bool {
		resp, err := client.Get("http://" + logs.addr("metrics") + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `istio_cni_repair_pods_repaired_total{result="success",type="delete"} 1`)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}
