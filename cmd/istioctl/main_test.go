package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// bin is the istioctl binary TestMain builds.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "istioctl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "istioctl")
	code := 1
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestBinaryKubeInject builds istioctl and injects the bookinfo example.
func TestBinaryKubeInject(t *testing.T) {
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

// TestBinaryThroughTheAPIServer runs the commands a real cluster test runs,
// against an API server without a kubelet: they find the pods and open the
// real port-forward, which the API server refuses only because no node runs
// them.
func TestBinaryThroughTheAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "istiod-7f9c", Namespace: "istio-system", Labels: map[string]string{"app": "istiod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "productpage-0", Namespace: "default"}},
	} {
		if p.Namespace != "default" {
			if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
		created, err := env.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = corev1.PodRunning
		if _, err := env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{name: "proxy-status --kubeconfig", args: []string{"proxy-status", "--kubeconfig", env.Kubeconfig}, want: "port-forward to istiod-7f9c.istio-system:8080: error upgrading connection: unable to upgrade connection: pod istiod-7f9c does not have a host assigned"},
		{name: "proxy-status KUBECONFIG", args: []string{"proxy-status"}, env: "KUBECONFIG=" + env.Kubeconfig, want: "port-forward to istiod-7f9c.istio-system:8080"},
		{name: "proxy-config secret", args: []string{"proxy-config", "secret", "productpage-0.default", "--kubeconfig", env.Kubeconfig}, want: "port-forward to productpage-0.default:15020: error upgrading connection: unable to upgrade connection: pod productpage-0 does not have a host assigned"},
		{name: "proxy-config listeners -i", args: []string{"proxy-config", "listeners", "productpage-0.default", "-c", env.Kubeconfig, "-i", "nowhere"}, want: "no running istiod pod in namespace nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want 1\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}
