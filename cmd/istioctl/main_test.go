package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster/clustertest"
	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
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

const (
	reviewsID = "sidecar~127.0.0.41~reviews-v1-0.default~default.svc.cluster.local"
	// target is what the proxyless app dials (its LDS name).
	target = "ratings.default.svc.cluster.local:9080"
)

// startIstiod runs a real istiod on loopback with two streams under
// reviewsID, as a pod with Istio's grpc-agent template has them: the
// agent's own (NameTable and every cluster) and the proxyless app's (its
// listener by name). It returns the debug address.
func startIstiod(t *testing.T) string {
	t.Helper()
	d, ctx := istiodtest.Start(t, nil)
	for _, s := range []struct {
		meta  map[string]string
		types []string
		names []string
	}{
		{meta: map[string]string{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"}, types: []string{gen.NameTableType, gen.ClusterType}},
		{meta: map[string]string{"GENERATOR": "grpc", "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"}, types: []string{gen.ListenerType}, names: []string{target}},
	} {
		c, err := xdstest.DialSotW(ctx, d.Addr("grpc"), xdstest.Node(reviewsID, s.meta))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		for _, typ := range s.types {
			if err := c.Subscribe(typ, s.names, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	pv := &proxyview.Client{Istiod: "http://" + d.Addr("debug")}
	polltest.Until(t, "both streams acknowledged", func() bool {
		s, err := pv.Status(ctx)
		return err == nil && len(s) == 2 && s[0].Types["CDS"].Status == "SYNCED" && s[1].Types["LDS"].Status == "SYNCED"
	})
	return d.Addr("debug")
}

// TestBinaryThroughTheAPIServer runs the exact commands of a real cluster
// (proxy-status and proxy-config with --kubeconfig) against a real API
// server, whose port-forwards a kubelet stand-in hands to a real istiod and
// an agent's status endpoint on loopback.
func TestBinaryThroughTheAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/certs" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `[{"name": "default", "type": "Cert Chain", "valid": true, "serial": "1f2e", "not_after": "2026-12-02T11:00:00Z", "not_before": "2026-12-01T10:59:00Z"}]`)
	}))
	defer agent.Close()
	kubelet := &clustertest.Kubelet{Targets: map[uint16]string{8080: startIstiod(t), 15020: agent.Listener.Addr().String()}}
	clustertest.StartKubelet(ctx, t, env.Client, "node-0", kubelet)
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "istiod-7f9c", Namespace: "istio-system", Labels: map[string]string{"app": "istiod", "istio.io/rev": "default"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "reviews-v1-0", Namespace: "default"}},
	} {
		if p.Namespace != "default" {
			if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		p.Spec = corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "c", Image: "x"}}}
		created, err := env.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := env.Kubeconfig
	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
		want []string
	}{
		{name: "proxy-status --kubeconfig", args: []string{"proxy-status", "--kubeconfig", kc},
			want: []string{"reviews-v1-0.default   Kubernetes   SYNCED   SYNCED   NOT SENT   NOT SENT   NOT SENT   istiod-7f9c   1.31.0"}},
		{name: "proxy-status KUBECONFIG", args: []string{"proxy-status"}, env: "KUBECONFIG=" + kc, want: []string{"reviews-v1-0.default"}},
		{name: "proxy-config secret", args: []string{"proxy-config", "secret", "reviews-v1-0.default", "--kubeconfig", kc},
			want: []string{"default         Cert Chain   ACTIVE   true         1f2e"}},
		{name: "proxy-config listeners of the app", args: []string{"proxy-config", "listeners", "reviews-v1-0.default", "--kubeconfig", kc},
			want: []string{target}},
		{name: "proxy-config clusters", args: []string{"-c", kc, "proxy-config", "clusters", "reviews-v1-0"},
			want: []string{"ratings.default.svc.cluster.local"}},
		{name: "proxy-config listeners -i", args: []string{"proxy-config", "listeners", "reviews-v1-0.default", "-c", kc, "-i", "nowhere"}, code: 1,
			want: []string{"no running istiod pod in namespace nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			got := stdout.String()
			if code != 0 {
				got = stderr.String()
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
	if len(kubelet.Forwards()) == 0 {
		t.Error("the API server handed no forward to the kubelet")
	}
}
