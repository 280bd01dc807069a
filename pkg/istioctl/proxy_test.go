package istioctl

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster/clustertest"
	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const productpageID = "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"

// startIstiod runs a real istiod on loopback with a sidecar connected as
// productpage-0.default, CDS and LDS acknowledged; it returns the debug address.
func startIstiod(t *testing.T) string {
	t.Helper()
	d, ctx := istiodtest.Start(t, nil)

	// The metadata a pilot-agent reports: proxy-status prints it.
	c, err := xdstest.DialSotW(ctx, d.Addr("grpc"), xdstest.Node(productpageID, map[string]string{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, typ := range []string{gen.ClusterType, gen.ListenerType} {
		if err := c.Subscribe(typ, nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	pv := &proxyview.Client{Istiod: "http://" + d.Addr("debug")}
	polltest.Until(t, "CDS and LDS acknowledged", func() bool {
		s, err := pv.Status(ctx)
		return err == nil && len(s) == 1 && s[0].Types["CDS"].Status == "SYNCED" && s[0].Types["LDS"].Status == "SYNCED"
	})
	return d.Addr("debug")
}

// startAgent serves an agent's /debug/certs.
func startAgent(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/certs" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `[{"name": "default", "type": "Cert Chain", "valid": true, "serial": "1f2e", "not_after": "2026-12-02T11:00:00Z", "not_before": "2026-12-01T10:59:00Z"}]`)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// createPod creates a pod and sets the status a kubelet would.
func createPod(ctx context.Context, t *testing.T, env *kubetest.Env, ns, name string, labels map[string]string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// istioSyncz is written from Istio 1.31's SyncStatus fields (proxy,
// cluster_id, istio_version, resources by type URL with sent and acked
// nonces).
const istioSyncz = `[{"cluster_id": "east", "proxy": "sidecar~10.0.0.7~productpage-v1-6d8.default~default.svc.cluster.local",
 "proxy_type": "sidecar", "istio_version": "1.31.0", "cluster_sent": "c1", "cluster_acked": "c1", "listener_sent": "l2", "listener_acked": "l1",
 "resources": {"type.googleapis.com/envoy.config.cluster.v3.Cluster": {"sent": "c1", "acked": "c1"},
  "type.googleapis.com/envoy.config.listener.v3.Listener": {"sent": "l2", "acked": "l1"}}}]`

// startIstioDebug stands in for Istio's istiod debug port seen from off
// its host: /debug/syncz in Istio's format, only to a bearer token the API
// server reviews as service account default of istio-system for the
// istio-ca audience (401 otherwise), as Istio's KubeJWT authenticator.
func startIstioDebug(ctx context.Context, t *testing.T, env *kubetest.Env) string {
	t.Helper()
	if _, err := env.Client.CoreV1().ServiceAccounts("istio-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		tr, err := env.Client.AuthenticationV1().TokenReviews().Create(r.Context(), &authv1.TokenReview{
			Spec: authv1.TokenReviewSpec{Token: tok, Audiences: []string{"istio-ca"}}}, metav1.CreateOptions{})
		if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:istio-system:default" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, istioSyncz)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// TestThroughTheAPIServer runs proxy-status and proxy-config as on a real
// cluster: the pods are found in a real API server, and the forwards (which
// need a kubelet) are recorded and answered by a real istiod and an agent's
// status endpoint on loopback.
func TestThroughTheAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	createPod(ctx, t, env, "istio-system", "istiod-7f9c", map[string]string{"app": "istiod", "istio.io/rev": "default"})
	createPod(ctx, t, env, "istio-system", "istiod-canary-5d2b", map[string]string{"app": "istiod", "istio.io/rev": "canary"})
	createPod(ctx, t, env, "default", "productpage-0", map[string]string{"app": "productpage"})
	debug, agent := startIstiod(t), startAgent(t)
	istio := startIstioDebug(ctx, t, env)
	kc := env.Kubeconfig
	// Two contexts: the current one points where nothing serves.
	two := clientcmdapi.NewConfig()
	two.Clusters["real"] = &clientcmdapi.Cluster{Server: env.URL, CertificateAuthority: env.CAFile}
	two.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	two.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}
	two.Contexts["real"] = &clientcmdapi.Context{Cluster: "real", AuthInfo: "admin"}
	two.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "admin"}
	two.CurrentContext = "gone"
	twoFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*two, twoFile); err != nil {
		t.Fatal(err)
	}

	type fwd = clustertest.Forward
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		code    int
		want    []string // in stdout (stderr when code != 0)
		absent  []string // not in it
		forward []fwd
	}{
		{
			name: "proxy-status --kubeconfig", args: []string{"proxy-status", "--kubeconfig", kc, "-r", "default"},
			want:    []string{"productpage-0.default   Kubernetes   SYNCED   SYNCED", "istiod-7f9c"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "-n keeps the namespace's proxies", args: []string{"proxy-status", "--kubeconfig", kc, "-r", "default", "-n", "default"},
			want:    []string{"productpage-0.default"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "every revision", args: []string{"proxy-status", "-c", kc},
			want:    []string{"istiod-7f9c,istiod-canary-5d2b"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}, {Namespace: "istio-system", Pod: "istiod-canary-5d2b", Port: 8080}},
		},
		{
			name: "only root flags before the command name", args: []string{"--kubeconfig=" + kc, "--revision=canary", "proxy-status"}, code: ExitUsage,
			want: []string{"unknown flag --revision before the command"},
		},
		{
			name: "root flags before the command name", args: []string{"-c", kc, "--istioNamespace", "istio-system", "proxy-status", "-r", "canary"},
			want:    []string{"istiod-canary-5d2b"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-canary-5d2b", Port: 8080}},
		},
		{
			name: "--context", args: []string{"proxy-status", "--kubeconfig", twoFile, "--context", "real", "-r", "default"},
			want:    []string{"productpage-0.default"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "the current context", args: []string{"proxy-status", "--kubeconfig", twoFile}, code: ExitError,
			want: []string{"127.0.0.1:1"},
		},
		{
			name: "KUBECONFIG", args: []string{"proxy-status", "-r", "default"}, env: []string{"KUBECONFIG", kc},
			want:    []string{"productpage-0.default"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "istio namespace", args: []string{"proxy-status", "--kubeconfig", kc, "-i", "mesh-ctl"}, code: ExitError,
			want: []string{"no running istiod pod in namespace mesh-ctl (label app=istiod)"},
		},
		{
			name: "ISTIOCTL_ISTIONAMESPACE", args: []string{"proxy-status", "--kubeconfig", kc}, env: []string{"ISTIOCTL_ISTIONAMESPACE", "mesh-ctl"}, code: ExitError,
			want: []string{"no running istiod pod in namespace mesh-ctl"},
		},
		{
			name: "-n filters", args: []string{"proxy-status", "--kubeconfig", kc, "-r", "default", "-n", "shop"},
			want:    []string{"NAME   CLUSTER"},
			absent:  []string{"productpage"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "no such revision", args: []string{"proxy-status", "--kubeconfig", kc, "-r", "blue"}, code: ExitError,
			want: []string{"label app=istiod,istio.io/rev=blue"},
		},
		{
			name: "no cluster", args: []string{"proxy-status"}, code: ExitError,
			want: []string{"no Kubernetes configuration", "--istiod URL"},
		},
		{
			name: "--istiod skips the cluster", args: []string{"proxy-status", "--istiod", "http://" + debug},
			want: []string{"productpage-0.default", "127.0.0.1"},
		},
		{
			name: "Istio's istiod off its host: a token from the cluster", args: []string{"proxy-status", "--istiod", istio, "--kubeconfig", kc},
			want: []string{"productpage-v1-6d8.default   east      SYNCED   STALE"},
		},
		{
			name: "Istio's istiod off its host, no cluster for a token", args: []string{"proxy-status", "--istiod", istio}, code: ExitError,
			want: []string{"401", "istio-ca", "no Kubernetes configuration"},
		},
		{
			name: "ISTIOD_DEBUG_ADDR", args: []string{"proxy-status", "--kubeconfig", kc}, env: []string{"ISTIOD_DEBUG_ADDR", "http://" + debug},
			want: []string{"productpage-0.default"},
		},
		{
			name: "secret POD.NS", args: []string{"proxy-config", "secret", "productpage-0.default", "--kubeconfig", kc},
			want:    []string{"default         Cert Chain   ACTIVE   true         1f2e"},
			forward: []fwd{{Namespace: "default", Pod: "productpage-0", Port: 15020}},
		},
		{
			name: "secret POD -n NS", args: []string{"proxy-config", "secret", "productpage-0", "-n", "default", "--kubeconfig", kc},
			want:    []string{"Cert Chain"},
			forward: []fwd{{Namespace: "default", Pod: "productpage-0", Port: 15020}},
		},
		{
			name: "secret of a pod that is not there", args: []string{"proxy-config", "secret", "reviews-0.default", "--kubeconfig", kc}, code: ExitError,
			want: []string{`pod reviews-0.default: pods "reviews-0" not found`},
		},
		{
			name: "secret --agent", args: []string{"proxy-config", "secret", "productpage-0", "--agent", "http://" + agent},
			want: []string{"Cert Chain"},
		},
		{
			name: "clusters in the context's namespace", args: []string{"proxy-config", "clusters", "productpage-0", "--kubeconfig", kc, "-r", "default"},
			want:    []string{"reviews.default.svc.cluster.local", "outbound"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "listeners from the istiod that has the proxy", args: []string{"proxy-config", "listeners", "productpage-0.default", "--kubeconfig", kc},
			want:    []string{"virtualOutbound"},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}},
		},
		{
			name: "a proxy no istiod has", args: []string{"proxy-config", "routes", "ratings-0.default", "--kubeconfig", kc}, code: ExitError,
			want:    []string{`proxy "ratings-0.default": not connected to istiod`},
			forward: []fwd{{Namespace: "istio-system", Pod: "istiod-7f9c", Port: 8080}, {Namespace: "istio-system", Pod: "istiod-canary-5d2b", Port: 8080}},
		},
		{
			name: "unknown kind", args: []string{"proxy-config", "gateways", "productpage-0", "--kubeconfig", kc}, code: ExitUsage,
			want: []string{`unknown kind "gateways"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &clustertest.Recorder{Targets: map[uint16]string{8080: debug, 15020: agent}}
			vars := map[string]string{}
			for i := 0; i+1 < len(tc.env); i += 2 {
				vars[tc.env[i]] = tc.env[i+1]
			}
			var out, errOut bytes.Buffer
			e := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				NewForwarder: func(*cluster.Cluster) cluster.Forwarder { return rec }}
			code := Main(ctx, tc.args, e)
			got := out.String()
			if code != ExitOK {
				got = errOut.String()
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("output has %q:\n%s", a, got)
				}
			}
			if d := cmp.Diff(tc.forward, rec.Forwards()); d != "" {
				t.Errorf("forwards (-want +got):\n%s", d)
			}
			if n := rec.Open(); n != 0 {
				t.Errorf("%d forwards left open", n)
			}
		})
	}
}
