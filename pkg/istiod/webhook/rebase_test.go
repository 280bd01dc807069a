package webhook

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sparse drops the null and empty members a Go re-encoding adds (the API
// server sends a pod without them).
func sparse(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = sparse(e)
			if m, ok := e.(map[string]any); e == nil || ok && len(m) == 0 {
				delete(t, k)
				continue
			}
			t[k] = e
		}
	case []any:
		for i := range t {
			t[i] = sparse(t[i])
		}
	}
	return v
}

// TestInjectPatchAppliesToTheRequest: the patch applies to the pod as the
// API server sends it, also when the proxy goes first (an app held until
// the proxy starts), which shifts the app's index under later ops, and
// gives exactly the injector's pod with each container once.
func TestInjectPatchAppliesToTheRequest(t *testing.T) {
	s := newServer(t)
	for name, annotations := range map[string]map[string]string{
		"sidecar":         nil,
		"held sidecar":    {"proxy.istio.io/config": `{"holdApplicationUntilProxyStarts": true}`},
		"held grpc-agent": {"proxy.istio.io/config": `{"holdApplicationUntilProxyStarts": true}`, "inject.istio.io/templates": "grpc-agent"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := testPod()
			for k, v := range annotations {
				pod.Annotations[k] = v
			}
			enc, _ := json.Marshal(pod)
			var doc any
			if err := json.Unmarshal(enc, &doc); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(sparse(doc))
			resp := respond(t, s, InjectPath, reviewBody(t, podResource, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, json.RawMessage(raw)))
			got := applyPatch(t, resp.Patch, raw)
			res, err := s.opts.Injector.Inject(pod, "shop")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(res.Pod.Spec.Containers, got.Spec.Containers); d != "" {
				t.Errorf("patched containers differ from the injector's (-want +got):\n%s\npatch: %s", d, resp.Patch)
			}
		})
	}
}
