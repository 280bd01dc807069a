package xds_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// TestIstioIstioctlProxyStatus runs Istio 1.31's own istioctl proxy-status
// against the xDS server on a TLS port whose CA reviews tokens with a real
// API server: istioctl gets its token by TokenRequest (istio-system/default,
// audience istio-ca), asks for istio.io/debug/syncz and prints every
// proxy's per-type state, this istiod's id and the proxies' versions.
func TestIstioIstioctlProxyStatus(t *testing.T) {
	istioctl := istiobin.Path(t, istiobin.Istioctl)
	kube, _, d := istioctlEnv(t)
	pp := d.sotw(t, productpage, map[string]string{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"})
	must(t, pp.Subscribe(gen.ClusterType, nil, wait))
	must(t, pp.Request(gen.ListenerType, nil, "", "", nil)) // sent, not acknowledged
	recv(t, pp)
	d.waitStatus(t, productpage, "CDS", "SYNCED")

	run := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, istioctl, args...)
		cmd.Env = []string{"HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("istioctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("proxy-status", "--kubeconfig", kube.Kubeconfig, "--xds-address", d.tlsAddr, "--verbosity", "1")
	// A sent type's state carries its age: "SYNCED (3s)".
	out = regexp.MustCompile(` \([^)]*\)`).ReplaceAllString(out, "")
	var row, header []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "NAME"):
			header = strings.Fields(l)
		case strings.HasPrefix(l, podID(productpage)+" "):
			row = strings.Fields(l)
		}
	}
	if row == nil || len(row) != len(header) {
		t.Fatalf("no row of %d columns for %s:\n%s", len(header), podID(productpage), out)
	}
	col := map[string]string{}
	for i, h := range header {
		col[h] = row[i]
	}
	for h, want := range map[string]string{"CLUSTER": "Kubernetes", "CDS": "SYNCED", "LDS": "STALE", "EDS": "IGNORED", "ISTIOD": "istiod-5d8f9-abcde", "VERSION": "1.31.0"} {
		if col[h] != want {
			t.Errorf("%s = %q, want %q\n%s", h, col[h], want, out)
		}
	}

	// Istio's generic debug type: istioctl prints the endpoint's body.
	var calls atomic.Int32
	d.srv.SetDebugHandler(echoDebug(&calls))
	out = run("x", "internal-debug", "config_dump?proxyID="+productpage, "--kubeconfig", kube.Kubeconfig, "--xds-address", d.tlsAddr)
	if want := "path=/debug/config_dump query=proxyID=" + productpage; !strings.Contains(out, want) || calls.Load() != 1 {
		t.Errorf("istioctl x internal-debug config_dump (%d debug requests): want %q in:\n%s", calls.Load(), want, out)
	}
}

// TestIstioIstioctlSyncDiff runs Istio's istioctl proxy-status POD, which
// compares istiod's istio.io/debug/config_dump of the proxy with the
// proxy's own config dump: given a dump equal to what the proxy holds, it
// finds clusters, listeners and routes matching.
func TestIstioIstioctlSyncDiff(t *testing.T) {
	istioctl := istiobin.Path(t, istiobin.Istioctl)
	kube, ctx, d := istioctlEnv(t)
	pp := d.sotw(t, productpage, nil)
	subscribeAll(t, pp)

	// The proxy's own dump: what istiod sent it, in Envoy's JSON.
	tok, err := kube.Client.CoreV1().ServiceAccounts("istio-system").CreateToken(ctx, "default",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ask(t, d.tlsAddr, d.tlsDial(tok.Status.Token), istioctlNode("istio-system", "default"), xds.DebugConfigDump, "productpage-0.default")
	if err != nil {
		t.Fatal(err)
	}
	diff := func(dump *adminv3.ConfigDump) string {
		t.Helper()
		b, err := protojson.Marshal(dump)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "config_dump.json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, istioctl, "proxy-status", "productpage-0.default", "--file", file,
			"--kubeconfig", kube.Kubeconfig, "--xds-address", d.tlsAddr)
		cmd.Env = []string{"HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("istioctl: %v\n%s", err, out)
		}
		return string(out)
	}
	out := diff(&adminv3.ConfigDump{Configs: r.GetResources()})
	for _, want := range []string{"Clusters Match", "Listeners Match", "Routes Match"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A proxy missing its clusters: the clusters differ.
	var clusters adminv3.ClustersConfigDump
	configs := slices.Clone(r.GetResources())
	for i, a := range configs {
		if a.MessageIs(&clusters) {
			empty, err := anypb.New(&adminv3.ClustersConfigDump{})
			if err != nil {
				t.Fatal(err)
			}
			configs[i] = empty
		}
	}
	if out := diff(&adminv3.ConfigDump{Configs: configs}); !strings.Contains(out, "Clusters Don't Match") {
		t.Errorf("a dump without clusters matched:\n%s", out)
	}
}

// istioctlEnv starts an API server with the istio-system/default service
// account Istio's istioctl asks a token for, and the xDS server with a CA
// that reviews tokens there.
func istioctlEnv(t *testing.T) (*kubetest.Env, context.Context, *debugEnv) {
	t.Helper()
	kube := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if _, err := kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Client.CoreV1().ServiceAccounts("istio-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return kube, ctx, newDebugEnvWith(t, ca.NewTokenReviewAuthenticator(kube.Client.AuthenticationV1().RESTClient(), "cluster.local"))
}
