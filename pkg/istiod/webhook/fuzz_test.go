package webhook

import (
	"encoding/json"
	"net/http"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzAdmissionReview feeds arbitrary bodies to both webhooks: no panic, a
// 200 answer is a well-formed review for the same uid, and a patch always
// applies to the object it was computed for.
func FuzzAdmissionReview(f *testing.F) {
	s := newServer(f)
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	f.Add(reviewBody(f, podResource, podKind, testPod()))
	p := testPod()
	p.Annotations["traffic.sidecar.istio.io/includeInboundPorts"] = "80,8080"
	p.Annotations["proxy.istio.io/config"] = "holdApplicationUntilProxyStarts: true"
	f.Add(reviewBody(f, podResource, podKind, p))
	f.Add(reviewBody(f, metav1.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
		metav1.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "VirtualService"},
		map[string]any{"metadata": map[string]any{"name": "x"}, "spec": map[string]any{"hosts": []string{"a"}}}))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"spec":{"containers":[{"name":"a"}]}}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{InjectPath, ValidatePath} {
			code, out := s.Review(path, body)
			if code != http.StatusOK {
				if code == http.StatusInternalServerError {
					t.Fatalf("%s: internal error for %q", path, body)
				}
				continue
			}
			rev, err := ParseReview(body)
			if err != nil {
				t.Fatalf("answered 200 to a review that does not parse: %v", err)
			}
			var resp admissionv1.AdmissionReview
			if err := json.Unmarshal(out, &resp); err != nil || resp.Response == nil || resp.Response.UID != rev.Request.UID {
				t.Fatalf("bad response %s (%v)", out, err)
			}
			if resp.Response.Allowed && len(resp.Response.Patch) > 0 {
				patch, err := jsonpatch.DecodePatch(resp.Response.Patch)
				if err != nil {
					t.Fatal(err)
				}
				// The patch was computed against the typed re-encoding of the object.
				var pod map[string]any
				if err := json.Unmarshal(rev.Request.Object.Raw, &pod); err != nil {
					t.Fatalf("patched an object that is not JSON: %v", err)
				}
				if _, err := patch.Apply(rev.Request.Object.Raw); err != nil {
					t.Fatalf("patch %s does not apply to %s: %v", resp.Response.Patch, rev.Request.Object.Raw, err)
				}
			}
		}
	})
}

// FuzzCreatePatch: for any two JSON documents the patch applies to the
// first and gives the second.
func FuzzCreatePatch(f *testing.F) {
	f.Add([]byte(`{"c":[{"name":"a"},{"name":"b"}]}`), []byte(`{"c":[{"name":"x"},{"name":"b","v":false}],"d":""}`))
	f.Add([]byte(`{"a":[1,2]}`), []byte(`{"a":[2,1,0],"b/c~":null}`))
	f.Add([]byte(`[]`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, from, to []byte) {
		var a, b any
		if json.Unmarshal(from, &a) != nil || json.Unmarshal(to, &b) != nil {
			return
		}
		_, aok := a.(map[string]any)
		_, bok := b.(map[string]any)
		if !aok || !bok {
			return // the API server patches an object into an object
		}
		checkPatch(t, from, to)
	})
}
