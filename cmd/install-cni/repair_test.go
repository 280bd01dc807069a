package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const chartNamespace = "istio-system"

// chart is the istio-cni chart rendered with some values: its RBAC and the
// node agent's container.
type chart struct {
	roles     []rbacv1.ClusterRole
	bindings  []rbacv1.ClusterRoleBinding
	container corev1.Container
}

func renderChart(t testing.TB, values map[string]any) chart {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("..", "..", "manifests", "charts", "istio-cni"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "istio-cni", Namespace: chartNamespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	var c chart
	for name, text := range files {
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch meta.Kind {
			case "ClusterRole":
				var o rbacv1.ClusterRole
				must(t, yaml.UnmarshalStrict(doc, &o))
				c.roles = append(c.roles, o)
			case "ClusterRoleBinding":
				var o rbacv1.ClusterRoleBinding
				must(t, yaml.UnmarshalStrict(doc, &o))
				c.bindings = append(c.bindings, o)
			case "DaemonSet":
				var o appsv1.DaemonSet
				must(t, yaml.UnmarshalStrict(doc, &o))
				c.container = o.Spec.Template.Spec.Containers[0]
			}
		}
	}
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apply replaces the cluster's istio-cni RBAC with the chart's.
func (c chart) apply(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	ctx := kubetest.Context(t)
	for _, r := range c.roles {
		_ = client.RbacV1().ClusterRoles().Delete(ctx, r.Name, metav1.DeleteOptions{})
		_, err := client.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{})
		must(t, err)
	}
	for _, b := range c.bindings {
		_ = client.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
		must(t, err)
	}
}

// env is the container's environment as the kubelet would give it on node.
func (c chart) env(node string) []string {
	var out []string
	for _, e := range c.container.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			switch f.FieldRef.FieldPath {
			case "spec.nodeName":
				v = node
			case "metadata.namespace":
				v = chartNamespace
			}
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}

// TestRepairAsTheChartDeploysIt runs the binary with the chart's arguments
// and environment, as the chart's service account bound to the chart's
// roles, against a real API server, for the chart's default values and each
// action: a pod of its node whose istio-validation init container exited
// 126 (the kubelet's report is written by the test) is deleted or labelled.
func TestRepairAsTheChartDeploysIt(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	bin := buildInstallCNI(t)
	tok := chartServiceAccount(t, env)

	yes := true
	owned := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-1", UID: "rs-uid", Controller: &yes}}
	deleted := func(p *corev1.Pod) bool { return p == nil || p.DeletionTimestamp != nil }
	labelled := func(p *corev1.Pod) bool { return p != nil && p.Labels["cni.istio.io/uninitialized"] == "true" }
	for i, tt := range []struct {
		name   string
		values map[string]any
		owners []metav1.OwnerReference
		done   func(*corev1.Pod) bool
		metric string
	}{
		{"defaults: an owned pod deleted", nil, owned, deleted, `{result="success",type="delete"} 1`},
		{"defaults: a bare pod reported", nil, nil, nil, `{result="skip",type="delete"} 1`},
		{"deletePods", map[string]any{"repair": map[string]any{"deletePods": true, "repairPods": false}}, nil, deleted, `{result="success",type="delete"} 1`},
		{"labelPods", map[string]any{"repair": map[string]any{"labelPods": true, "repairPods": false}}, owned, labelled, `{result="success",type="label"} 1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns, node := fmt.Sprintf("repair-%d", i), fmt.Sprintf("node-%d", i)
			ch := renderChart(t, tt.values)
			ch.apply(t, env.Client)
			_, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			must(t, err)
			pod, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "broken", OwnerReferences: tt.owners, Annotations: map[string]string{"sidecar.istio.io/status": "{}"}},
				Spec: corev1.PodSpec{
					NodeName:       node,
					InitContainers: []corev1.Container{{Name: "istio-validation", Image: "proxyv2"}},
					Containers:     []corev1.Container{{Name: "app", Image: "app"}},
				},
			}, metav1.CreateOptions{})
			must(t, err)
			// What the kubelet reports when validation found no capture.
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "istio-validation", Image: "proxyv2", ImageID: "proxyv2",
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 126, Reason: "Error"}},
			}}}
			_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			must(t, err)

			r := ch.start(t, env, bin, tok, node)
			cmd, logs := r.cmd, r.logs
			defer cmd.Process.Kill()
			polltest.Until(t, "the metrics server's address in the log", func() bool { return logs.addr("metrics") != "" })
			client := &http.Client{Timeout: 5 * time.Second}
			polltest.Until(t, "the repair counted: "+tt.metric, func() bool {
				resp, err := client.Get("http://" + logs.addr("metrics") + "/metrics")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return strings.Contains(string(b), "istio_cni_repair_pods_repaired_total"+tt.metric)
			})
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "broken", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				p, err = nil, nil
			}
			must(t, err)
			switch {
			case tt.done != nil && !tt.done(p):
				t.Errorf("pod not repaired: %+v", p)
			case tt.done == nil && (deleted(p) || labelled(p)):
				t.Errorf("pod changed: %+v", p)
			}
			must(t, cmd.Process.Signal(syscall.SIGTERM))
			if err := cmd.Wait(); err != nil {
				t.Errorf("exit after SIGTERM: %v", err)
			}
		})
	}
}

// buildInstallCNI builds install-cni as make build does.
func buildInstallCNI(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "install-cni")
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatal(string(out))
	}
	return bin
}

// chartServiceAccount makes the chart's namespace and service account on
// env and returns a token of that account.
func chartServiceAccount(tb testing.TB, env *kubetest.Env) string {
	tb.Helper()
	ctx := kubetest.Context(tb)
	_, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace}}, metav1.CreateOptions{})
	must(tb, err)
	_, err = env.Client.CoreV1().ServiceAccounts(chartNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "istio-cni"}}, metav1.CreateOptions{})
	must(tb, err)
	tok, err := env.Client.CoreV1().ServiceAccounts(chartNamespace).CreateToken(ctx, "istio-cni", &authv1.TokenRequest{}, metav1.CreateOptions{})
	must(tb, err)
	return tok.Status.Token
}

// running is install-cni started by chart.start.
type running struct {
	cmd  *exec.Cmd
	logs *serving
	dir  string // its directory tree: net.d, bin, sa, run
}

// start runs bin as the chart's container runs it on node, with the
// service account token tok, in a directory tree of the test's. Kill the
// process when done.
func (c chart) start(tb testing.TB, env *kubetest.Env, bin, tok, node string) running {
	tb.Helper()
	u, err := url.Parse(env.URL)
	must(tb, err)
	d := tb.TempDir()
	for _, dir := range []string{"net.d", "bin", "sa"} {
		must(tb, os.MkdirAll(filepath.Join(d, dir), 0o755))
	}
	ca, err := os.ReadFile(env.CAFile)
	must(tb, err)
	for name, content := range map[string]string{
		"net.d/10-k8s.conflist": `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"}]}`,
		"plugin":                "plugin", "istio-cni-lookup": "lookup", "sa/token": tok, "sa/ca.crt": string(ca),
	} {
		must(tb, os.WriteFile(filepath.Join(d, name), []byte(content), 0o644))
	}
	// The chart's arguments, then this test's directories and ports.
	args := append(append([]string(nil), c.container.Args...),
		"--mounted-cni-net-dir", filepath.Join(d, "net.d"), "--cni-bin-dir", filepath.Join(d, "bin"),
		"--cni-agent-run-dir", filepath.Join(d, "run"), "--plugin-binary", filepath.Join(d, "plugin"),
		"--token", filepath.Join(d, "sa/token"), "--ca", filepath.Join(d, "sa/ca.crt"),
		"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(c.env(node), "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port())
	logs := &serving{addrs: map[string]string{}}
	cmd.Stderr = logs
	must(tb, cmd.Start())
	return running{cmd: cmd, logs: logs, dir: d}
}
