package podcache

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kuberest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// TestServesTheNodesPods: against a real API server, the cache answers the
// API's pod GET for pods bound to its node, 404 for others, and follows a
// pod created after it started.
func TestServesTheNodesPods(t *testing.T) {
	if _, err := kubetest.AssetsDir(); err != nil {
		t.Skip(err) // built by `make k8s-assets`, which `make test` runs first
	}
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	pod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"sidecar.istio.io/status": "{}"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("here", "node-a")
	pod("there", "node-b")
	core, err := kuberest.NewCore(env.Config, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(core, "node-a", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "run", "pods.sock")
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Serve(sctx, sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	hc := unixClient(sock)
	get := func(name string) (int, *corev1.Pod) {
		resp, err := hc.Get("http://node-agent/api/v1/namespaces/default/pods/" + name)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var p corev1.Pod
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, &p
	}
	polltest.Until(t, "the cache serves pod here", func() bool { code, _ := get("here"); return code == http.StatusOK })
	if code, p := get("here"); code != http.StatusOK || p.Annotations["sidecar.istio.io/status"] != "{}" || p.Spec.Containers[0].Name != "app" {
		t.Errorf("here: %d %+v", code, p)
	}
	if code, _ := get("there"); code != http.StatusNotFound {
		t.Errorf("a pod of another node: %d, want 404", code)
	}
	pod("later", "node-a")
	polltest.Until(t, "the cache serves a pod created after it started", func() bool { code, _ := get("later"); return code == http.StatusOK })
	resp, err := hc.Post("http://node-agent/api/v1/namespaces/default/pods/here", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST: %v %v, want 400", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}
