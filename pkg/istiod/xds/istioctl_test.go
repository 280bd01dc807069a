package xds_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
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
	kube := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if _, err := kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Client.CoreV1().ServiceAccounts("istio-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := newDebugEnvWith(t, ca.NewTokenReviewAuthenticator(kube.Client, "cluster.local"))
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
		case strings.HasPrefix(l, productpage):
			row = strings.Fields(l)
		}
	}
	if row == nil || len(row) != len(header) {
		t.Fatalf("no row of %d columns for %s:\n%s", len(header), productpage, out)
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
}
