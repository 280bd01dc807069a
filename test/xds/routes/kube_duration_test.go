package routes_test

import (
	"testing"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
)

// TestKubeDurations documents where duration spellings need
// pkg/istiod/duration: a VirtualService stored with "300ms" and "1h" (as
// Istio's CRD schema admits) decodes through Istio's client-go, which the
// Kubernetes registry's informers use, because istio.io/api's
// UnmarshalJSON reads durations with time.ParseDuration. So the
// Kubernetes registry needs no hook; the file registry (protojson) does.
func TestKubeDurations(t *testing.T) {
	env, ctx := crdtest.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "durations", "namespace": "default"},
		"spec": map[string]any{"hosts": []any{"echo"}, "http": []any{map[string]any{
			"timeout": "300ms",
			"retries": map[string]any{"attempts": int64(2), "perTryTimeout": "1h"},
			"route":   []any{map[string]any{"destination": map[string]any{"host": "echo"}}},
		}}},
	}}
	gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ic.NetworkingV1().VirtualServices("default").Get(ctx, "durations", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("typed get: %v", err)
	}
	hr := got.Spec.GetHttp()[0]
	if d := hr.GetTimeout().AsDuration(); d != 300*time.Millisecond {
		t.Errorf("timeout %v, want 300ms", d)
	}
	if d := hr.GetRetries().GetPerTryTimeout().AsDuration(); d != time.Hour {
		t.Errorf("perTryTimeout %v, want 1h", d)
	}
}
