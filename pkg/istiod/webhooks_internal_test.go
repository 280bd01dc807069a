package istiod

import (
	"path/filepath"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

func TestInjectorConfigMap(t *testing.T) {
	env := map[string]string{"POD_NAMESPACE": "mesh", "REVISION": "blue"}
	for _, tc := range []struct {
		name                  string
		w                     Webhooks
		getenv                map[string]string
		start                 string
		wantNS, wantConfigMap string
	}{
		{"defaults", Webhooks{}, nil, "default", "istio-system", "istio-sidecar-injector"},
		{"environment", Webhooks{}, env, "default", "mesh", "istio-sidecar-injector-blue"},
		{"REVISION=default", Webhooks{}, map[string]string{"REVISION": "default"}, "green", "istio-system", "istio-sidecar-injector"},
		{"starting revision", Webhooks{}, nil, "green", "istio-system", "istio-sidecar-injector-green"},
		{"fields win", Webhooks{Namespace: "own", Revision: "red"}, env, "green", "own", "istio-sidecar-injector-red"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, name := tc.w.injectorConfigMap(func(k string) string { return tc.getenv[k] }, tc.start)
			if ns != tc.wantNS || name != tc.wantConfigMap {
				t.Errorf("got %s/%s, want %s/%s", ns, name, tc.wantNS, tc.wantConfigMap)
			}
		})
	}
}

// TestRestConfigRateLimits: every API client istiod builds carries the
// --kubernetesApiQPS and --kubernetesApiBurst settings, not client-go's 5.
func TestRestConfigRateLimits(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kubetest.WriteKubeconfig(kc, "https://127.0.0.1:6443", "", "token"); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Kubeconfig, cfg.KubeQPS, cfg.KubeBurst = kc, 500, 1000
	rc, err := restConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rc.QPS != 500 || rc.Burst != 1000 {
		t.Errorf("rest config QPS %v, burst %d; want 500, 1000", rc.QPS, rc.Burst)
	}
}
