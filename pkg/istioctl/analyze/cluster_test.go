package analyze_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestAnalyzeCluster runs istioctl analyze against a real API server with
// Istio's CRDs: objects of the kinds istiod reads and one it does not
// (EnvoyFilter, whose CRD the test installs), then the same with a file
// that adds the missing Service over the cluster's objects.
func TestAnalyzeCluster(t *testing.T) {
	env, ctx := crdtest.Start(t)
	const ns = "shop"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ratings", Namespace: ns,
		Annotations: map[string]string{"inject.istio.io/templates": "grpc-agent"}},
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec: apinet.VirtualService{Hosts: []string{"reviews"}, Http: []*apinet.HTTPRoute{{
			Route:  []*apinet.HTTPRouteDestination{{Destination: &apinet.Destination{Host: "reviews-v2"}}},
			Mirror: &apinet.Destination{Host: "reviews"}}}}}
	if _, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// An EnvoyFilter CRD (crdtest installs only the kinds istiod reads).
	xc, err := apiext.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	open := true
	crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "envoyfilters.networking.istio.io"},
		Spec: apiextv1.CustomResourceDefinitionSpec{Group: "networking.istio.io", Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Kind: "EnvoyFilter", ListKind: "EnvoyFilterList", Plural: "envoyfilters", Singular: "envoyfilter"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: "v1alpha3", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &open}}}}}}
	if _, err := xc.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ef := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
		"metadata": map[string]any{"name": "lua", "namespace": ns}, "spec": map[string]any{}}}
	gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1alpha3", Resource: "envoyfilters"}
	polltest.Until(t, "an EnvoyFilter created (CRD established)", func() bool {
		_, err := dc.Resource(gvr).Namespace(ns).Create(ctx, ef, metav1.CreateOptions{})
		return err == nil
	})

	code, out, errOut := run(t, nil, "analyze", "--kubeconfig", env.Kubeconfig, "-n", ns)
	if code != 79 {
		t.Errorf("exit %d, want 79; stderr:\n%s", code, errOut)
	}
	golden(t, "cluster.golden", out)

	// A file with the missing Service, analyzed over the cluster.
	fix := filepath.Join(t.TempDir(), "reviews-v2.yaml")
	if err := os.WriteFile(fix, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: reviews-v2}\nspec: {ports: [{name: http, port: 9080}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, map[string]string{"KUBECONFIG": env.Kubeconfig}, "-n", ns, "analyze", fix)
	if code != 0 {
		t.Errorf("with the Service from a file: exit %d, want 0 (warnings only); stderr:\n%s", code, errOut)
	}
	golden(t, "cluster-fixed.golden", out)

	code, _, errOut = run(t, nil, "analyze", "--kubeconfig", env.Kubeconfig, "-n", "nowhere")
	if code != 0 || !strings.Contains(errOut, `namespace "nowhere" not found`) {
		t.Errorf("missing namespace: exit %d, stderr %q", code, errOut)
	}
}
