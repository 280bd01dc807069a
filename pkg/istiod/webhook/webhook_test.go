package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

func newServer(t testing.TB) *Server {
	t.Helper()
	cfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Injector: in, Validator: &validation.Validator{}})
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team/owner": "a~b"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}},
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx",
				Ports:         []corev1.ContainerPort{{ContainerPort: 80}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func reviewBody(t testing.TB, resource metav1.GroupVersionResource, kind metav1.GroupVersionKind, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	rev := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "uid-1", Kind: kind, Resource: resource, Namespace: "shop", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	}
	b, err := json.Marshal(&rev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeResponse(t testing.TB, code int, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &rev); err != nil {
		t.Fatal(err)
	}
	if rev.Response == nil || rev.Response.UID != "uid-1" || rev.APIVersion != "admission.k8s.io/v1" || rev.Kind != "AdmissionReview" {
		t.Fatalf("bad response envelope: %s", body)
	}
	return rev.Response
}

// TestInjectPatchEqualsInjector: the patch, applied to the pod as the API
// server would, gives exactly the injector's pod.
func TestInjectPatchEqualsInjector(t *testing.T) {
	s := newServer(t)
	pod := testPod()
	code, body := s.Review(InjectPath, reviewBody(t, podResource, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, pod))
	resp := decodeResponse(t, code, body)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v", resp)
	}
	raw, _ := json.Marshal(pod)
	got := applyPatch(t, resp.Patch, raw)
	res, err := s.opts.Injector.Inject(pod, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(res.Pod, got); d != "" {
		t.Errorf("patched pod differs from the injector's (-want +got):\n%s", d)
	}
	// The patch adds containers and annotations; it does not rewrite
	// what it keeps (the app container is patched in place).
	for _, op := range mustOps(t, resp.Patch) {
		if op.Path == "/spec/containers" || op.Path == "/metadata/annotations" {
			t.Errorf("patch replaces a whole list or map: %s %s", op.Op, op.Path)
		}
	}
}

// applyPatch applies an admission response's JSON patch to a pod's JSON,
// as the API server does, and decodes the result.
func applyPatch(t testing.TB, patch, raw []byte) *corev1.Pod {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("patch does not apply: %v\n%s", err, patch)
	}
	var got corev1.Pod
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// respond runs one review and decodes the answer.
func respond(t testing.TB, s *Server, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	code, out := s.Review(path, body)
	return decodeResponse(t, code, out)
}

func mustOps(t testing.TB, b []byte) []Op {
	var ops []Op
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestInjectSkipsAndRefusals(t *testing.T) {
	s := newServer(t)
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

	off := testPod()
	off.Labels[LabelInject] = "false"
	off.Annotations[LabelInject] = "true"
	resp := respond(t, s, InjectPath, reviewBody(t, podResource, podKind, off))
	if !resp.Allowed || resp.Patch != nil || len(resp.Warnings) == 0 {
		t.Errorf("opted-out pod: allowed=%v patch=%s warnings=%q", resp.Allowed, resp.Patch, resp.Warnings)
	}

	bad := testPod()
	bad.Annotations["traffic.sidecar.istio.io/excludeOutboundPorts"] = "http"
	resp = respond(t, s, InjectPath, reviewBody(t, podResource, podKind, bad))
	if resp.Allowed || resp.Patch != nil || !strings.Contains(resp.Result.Message, "traffic.sidecar.istio.io/excludeOutboundPorts") {
		t.Errorf("bad annotation: allowed=%v patch=%s result=%+v", resp.Allowed, resp.Patch, resp.Result)
	}

	other := reviewBody(t, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, map[string]any{"kind": "Deployment"})
	if resp := respond(t, s, InjectPath, other); !resp.Allowed || resp.Patch != nil {
		t.Errorf("non-pod: %+v", resp)
	}

	notPod := reviewBody(t, podResource, podKind, map[string]any{"spec": "nope"})
	if resp := respond(t, s, InjectPath, notPod); resp.Allowed {
		t.Errorf("undecodable pod allowed")
	}
}

func TestValidateRefusesWithReason(t *testing.T) {
	s := newServer(t)
	vs := map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "reviews"},
		"spec": map[string]any{"hosts": []string{"reviews"}, "http": []any{map[string]any{"route": []any{
			map[string]any{"destination": map[string]any{"host": "reviews", "subset": "v1"}, "weight": -60},
			map[string]any{"destination": map[string]any{"host": "reviews", "subset": "v2"}, "weight": 30},
		}}}},
	}
	kind := metav1.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "VirtualService"}
	res := metav1.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	resp := respond(t, s, ValidatePath, reviewBody(t, res, kind, vs))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "weight: -60: must not be negative") || resp.Result.Code != 400 {
		t.Fatalf("response %+v", resp.Result)
	}
}

func TestBadRequests(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		name string
		body string
		code int
	}{
		{"not json", "{{{", 400},
		{"wrong kind", `{"apiVersion":"v1","kind":"Pod"}`, 400},
		{"no request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400},
		{"no uid", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, 400},
		{"empty", ``, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{InjectPath, ValidatePath} {
				if code, body := s.Review(path, []byte(tc.body)); code != tc.code {
					t.Errorf("%s: status %d (%s), want %d", path, code, body, tc.code)
				}
			}
		})
	}
	if code, _ := s.Review("/nope", nil); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestCreatePatch(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		{"add key with slash", `{"a":{}}`, `{"a":{"x/y~z":"1"}}`},
		{"insert named in front", `{"c":[{"name":"a","v":1},{"name":"b"}]}`, `{"c":[{"name":"i"},{"name":"a","v":2},{"name":"b"},{"name":"z"}]}`},
		{"remove named", `{"c":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, `{"c":[{"name":"c","x":1}]}`},
		{"reordered named", `{"c":[{"name":"a"},{"name":"b"}]}`, `{"c":[{"name":"b"},{"name":"a"}]}`},
		{"scalars", `{"a":[1,2,3],"b":true,"c":null}`, `{"a":[1,2],"b":"x","d":[]}`},
		{"same", `{"a":[{"name":"x"}]}`, `{"a":[{"name":"x"}]}`},
		{"empty to named", `{"c":[]}`, `{"c":[{"name":"a"}]}`},
		{"zero values", `{"a":1,"b":"x","c":true,"d":{}}`, `{"a":0,"b":"","c":false,"d":{"e":null,"f":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPatch(t, []byte(tc.from), []byte(tc.to))
		})
	}
}

func checkPatch(t testing.TB, from, to []byte) {
	t.Helper()
	ops, err := CreatePatch(from, to)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ops)
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Apply(from)
	if err != nil {
		t.Fatalf("apply %s: %v", b, err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(to, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("patch %s gives %s, want %s", b, got, to)
	}
}

func TestHandlerHTTP(t *testing.T) {
	cfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Injector: in, Validator: &validation.Validator{}, MaxRequestBytes: 1 << 16})
	h := s.Handler()
	body := reviewBody(t, podResource, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, testPod())
	for _, tc := range []struct {
		name, method, path, ctype string
		body                      []byte
		code                      int
	}{
		{"inject", http.MethodPost, "/inject", "application/json", body, 200},
		{"inject with path parameters", http.MethodPost, "/inject/cluster/c1/net/n1", "application/json; charset=utf-8", body, 200},
		{"validate", http.MethodPost, "/validate", "application/json", body, 200},
		{"GET", http.MethodGet, "/inject", "application/json", nil, 405},
		{"content type", http.MethodPost, "/inject", "text/plain", body, 415},
		{"too large", http.MethodPost, "/inject", "application/json", bytes.Repeat([]byte(" "), 1<<17), 413},
		{"garbage", http.MethodPost, "/validate", "application/json", []byte("nope"), 400},
		{"ready", http.MethodGet, "/ready", "", nil, 200},
		{"unknown", http.MethodPost, "/mutate", "application/json", body, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, bytes.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Errorf("status %d (%s), want %d", rec.Code, rec.Body, tc.code)
			}
		})
	}
}

func TestServeNeedsCertificate(t *testing.T) {
	s := New(Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := s.Serve(context.Background(), l, &tls.Config{}); err == nil {
		t.Error("served without a certificate")
	}
}
