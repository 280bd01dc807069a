package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// writeKubeconfig writes a kubeconfig with context "real" (the test's API
// server, namespace ns) and "other" (an address nothing serves), current
// context current.
func writeKubeconfig(t *testing.T, env *kubetest.Env, path, current, ns string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["real"] = &clientcmdapi.Cluster{Server: env.URL, CertificateAuthority: env.CAFile}
	cfg.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}
	cfg.Contexts["real"] = &clientcmdapi.Context{Cluster: "real", AuthInfo: "admin", Namespace: ns}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "admin"}
	cfg.CurrentContext = current
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestLoad resolves the cluster as Istio's istioctl does: --kubeconfig over
// KUBECONFIG over ~/.kube/config, --context over the current context, and
// the context's namespace as the default one.
func TestLoad(t *testing.T) {
	env := kubetest.Start(t)
	if env.Config.BearerToken == "" {
		t.Fatal("kubetest config has no bearer token")
	}
	dir := t.TempDir()
	realFile, otherFile := filepath.Join(dir, "real"), filepath.Join(dir, "other")
	writeKubeconfig(t, env, realFile, "real", "shop")
	writeKubeconfig(t, env, otherFile, "other", "")
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeKubeconfig(t, env, filepath.Join(home, ".kube", "config"), "real", "")

	for _, tc := range []struct {
		name     string
		opts     cluster.Options
		wantHost string
		wantNS   string
		wantErr  string
	}{
		{name: "flag", opts: cluster.Options{Kubeconfig: realFile}, wantHost: env.URL, wantNS: "shop"},
		{name: "flag over KUBECONFIG", opts: cluster.Options{Kubeconfig: realFile, Getenv: envOf("KUBECONFIG", otherFile)}, wantHost: env.URL, wantNS: "shop"},
		{name: "KUBECONFIG", opts: cluster.Options{Getenv: envOf("KUBECONFIG", realFile, "HOME", filepath.Join(dir, "nohome"))}, wantHost: env.URL, wantNS: "shop"},
		{name: "KUBECONFIG over home", opts: cluster.Options{Getenv: envOf("KUBECONFIG", otherFile, "HOME", home)}, wantHost: "https://127.0.0.1:1", wantNS: "default"},
		{name: "home", opts: cluster.Options{Getenv: envOf("HOME", home)}, wantHost: env.URL, wantNS: "default"},
		{name: "context", opts: cluster.Options{Kubeconfig: otherFile, Context: "real"}, wantHost: env.URL, wantNS: "default"},
		{name: "unknown context", opts: cluster.Options{Kubeconfig: realFile, Context: "nope"}, wantErr: `context "nope" does not exist`},
		{name: "missing file", opts: cluster.Options{Kubeconfig: filepath.Join(dir, "absent")}, wantErr: "absent"},
		{name: "nothing", opts: cluster.Options{Getenv: envOf("HOME", filepath.Join(dir, "nohome"))}, wantErr: cluster.ErrNoConfig.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := cluster.Load(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cl.Config.Host != tc.wantHost || cl.Namespace != tc.wantNS {
				t.Errorf("host %s namespace %s, want %s %s", cl.Config.Host, cl.Namespace, tc.wantHost, tc.wantNS)
			}
			if tc.wantHost != env.URL {
				return
			}
			if err := cl.Clients.Core.Get().Resource("namespaces").Name("default").Do(kubetest.Context(t)).Error(); err != nil {
				t.Errorf("client does not reach the API server: %v", err)
			}
		})
	}
}

// pod is a pod the test creates with a status no kubelet sets here.
type pod struct {
	name, ns    string
	labels      map[string]string
	annotations map[string]string
	phase       corev1.PodPhase
	ready       bool
	deleting    bool
}

func createPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, pods []pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{}); err != nil {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		obj := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: p.labels, Annotations: p.annotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "istiod"}}},
		}
		if p.deleting {
			obj.Finalizers = []string{"skiff.test/hold"}
		}
		created, err := cs.CoreV1().Pods(p.ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if p.ready {
			status = corev1.ConditionTrue
		}
		created.Status = corev1.PodStatus{Phase: p.phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}
		if _, err := cs.CoreV1().Pods(p.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if p.deleting {
			if err := cs.CoreV1().Pods(p.ns).Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cur, err := cs.CoreV1().Pods(p.ns).Get(context.Background(), p.name, metav1.GetOptions{})
				if err == nil {
					cur.Finalizers = nil
					_, _ = cs.CoreV1().Pods(p.ns).Update(context.Background(), cur, metav1.UpdateOptions{})
				}
			})
		}
	}
}

var (
	istiodLabels = map[string]string{"app": "istiod", "istio.io/rev": "default"}
	canaryLabels = map[string]string{"app": "istiod", "istio.io/rev": "canary"}
)

// TestIstiodPods finds the running istiod pods of a revision, ready first,
// and the agent port of a pod, in a real API server.
func TestIstiodPods(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	createPods(ctx, t, env.Client, []pod{
		{name: "istiod-b", ns: "istio-system", labels: istiodLabels, phase: corev1.PodRunning, ready: true},
		{name: "istiod-a", ns: "istio-system", labels: istiodLabels, phase: corev1.PodRunning},
		{name: "istiod-c", ns: "istio-system", labels: istiodLabels, phase: corev1.PodRunning, ready: true},
		{name: "istiod-pending", ns: "istio-system", labels: istiodLabels, phase: corev1.PodPending},
		{name: "istiod-leaving", ns: "istio-system", labels: istiodLabels, phase: corev1.PodRunning, ready: true, deleting: true},
		{name: "istiod-canary", ns: "istio-system", labels: canaryLabels, phase: corev1.PodRunning, ready: true},
		{name: "istiod-elsewhere", ns: "mesh-ctl", labels: istiodLabels, phase: corev1.PodRunning, ready: true},
		{name: "prometheus", ns: "istio-system", labels: map[string]string{"app": "prometheus"}, phase: corev1.PodRunning, ready: true},
		{name: "app-0", ns: "shop", phase: corev1.PodRunning, ready: true},
		{name: "app-1", ns: "shop", phase: corev1.PodRunning, annotations: map[string]string{"status.sidecar.istio.io/port": "15999"}},
		{name: "app-2", ns: "shop", phase: corev1.PodPending},
		{name: "app-3", ns: "shop", phase: corev1.PodRunning, annotations: map[string]string{"status.sidecar.istio.io/port": "x"}},
	})
	cl, err := cluster.Load(cluster.Options{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, rev string
		want    []string
		wantErr string
	}{
		{ns: "istio-system", want: []string{"istiod-b", "istiod-c", "istiod-canary", "istiod-a"}},
		{ns: "istio-system", rev: "default", want: []string{"istiod-b", "istiod-c", "istiod-a"}},
		{ns: "istio-system", rev: "canary", want: []string{"istiod-canary"}},
		{ns: "mesh-ctl", want: []string{"istiod-elsewhere"}},
		{ns: "istio-system", rev: "nope", wantErr: "no running istiod pod in namespace istio-system (label app=istiod,istio.io/rev=nope)"},
		{ns: "shop", wantErr: "no running istiod pod in namespace shop (label app=istiod)"},
	} {
		t.Run(tc.ns+"/"+tc.rev, func(t *testing.T) {
			pods, err := cl.IstiodPods(ctx, tc.ns, tc.rev)
			if tc.wantErr != "" {
				var nf *cluster.IstiodNotFoundError
				if !errors.As(err, &nf) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pods (-want +got):\n%s", d)
			}
		})
	}
	for _, tc := range []struct {
		pod     string
		want    uint16
		wantErr string
	}{
		{pod: "app-0", want: 15020},
		{pod: "app-1", want: 15999},
		{pod: "app-2", wantErr: "pod app-2.shop is Pending, not Running"},
		{pod: "app-3", wantErr: `annotation status.sidecar.istio.io/port="x" is not a port`},
		{pod: "gone", wantErr: `pod gone.shop: pods "gone" not found`},
	} {
		t.Run("agent port "+tc.pod, func(t *testing.T) {
			port, err := cl.AgentPort(ctx, "shop", tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || port != tc.want {
				t.Errorf("port %d, %v; want %d", port, err, tc.want)
			}
		})
	}

	// The real port-forward goes through the API server, which needs the
	// pod's kubelet; here there is none, so it must fail, naming the pod,
	// rather than hang.
	t.Run("port-forward without a kubelet", func(t *testing.T) {
		fw := &cluster.PortForwarder{Config: cl.Config}
		addr, stop, err := fw.Forward(ctx, "istio-system", "istiod-b", cluster.IstiodDebugPort)
		if err == nil {
			stop()
			t.Fatalf("forward to a pod without a node succeeded: %s", addr)
		}
		t.Logf("forward: %v", err)
		// The API server's own answer: the request reached pods/portforward.
		if !strings.Contains(err.Error(), "port-forward to istiod-b.istio-system:8080") || !strings.Contains(err.Error(), "does not have a host assigned") {
			t.Errorf("err = %v", err)
		}
	})
}
