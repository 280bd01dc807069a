package istiod

import "testing"

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
