package kube

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/injecttest"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestTrimKeepsWhatIstiodReads builds the model and runs the analysers on
// injected, running pods as the API server serves them, and again on the
// same pods trimmed as the informer caches them: everything istiod derives
// from pods must come out the same.
func TestTrimKeepsWhatIstiodReads(t *testing.T) {
	in, err := injecttest.Injector()
	if err != nil {
		t.Fatal(err)
	}
	full := &model.Inputs{}
	for i, app := range []string{"reviews", "ratings"} {
		full.Services = append(full.Services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "shop"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.0.%d", i+10), Selector: map[string]string{"app": app},
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
		})
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: app + "-1", Namespace: "shop", Labels: map[string]string{"kubernetes.io/service-name": app}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
		}
		for j := range 2 {
			s := injecttest.Spec{Name: fmt.Sprintf("%s-%d", app, j), Namespace: "shop", App: app, ServiceAccount: app + "-sa",
				IP: fmt.Sprintf("10.1.%d.%d", i, j+1), HostIP: "192.168.0.2", Node: "node-a"}
			pod, err := injecttest.Pod(in, s)
			if err != nil {
				t.Fatal(err)
			}
			pod.Labels["topology.kubernetes.io/zone"] = "zone-b"
			if j == 1 {
				pod.Annotations[analysis.InjectTemplatesAnnotation] = "grpc-agent"
			}
			pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:podIP":{}}}`)}}}
			full.Pods = append(full.Pods, pod)
			ep := discoveryv1.Endpoint{Addresses: []string{s.IP}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}
			if j == 0 { // found by name; the other by address
				ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: s.Name}
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		full.EndpointSlices = append(full.EndpointSlices, sl)
	}
	// A policy for the pods, so the analysers count them by proxy type.
	full.Sidecars = append(full.Sidecars, &networking.Sidecar{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop"},
		Spec: apinet.Sidecar{WorkloadSelector: &apinet.WorkloadSelector{Labels: map[string]string{"app": "reviews"}},
			Egress: []*apinet.IstioEgressListener{{Hosts: []string{"./*"}}}},
	})
	trimmed := *full
	trimmed.Pods = nil
	var fullBytes, trimmedBytes int
	for _, p := range full.Pods {
		o, err := trimPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		tp := o.(*corev1.Pod)
		if tp.ManagedFields != nil || tp.Spec.Containers != nil || tp.Status.ContainerStatuses != nil {
			t.Fatalf("trimmed pod keeps managedFields, containers or their statuses: %+v", tp)
		}
		trimmed.Pods = append(trimmed.Pods, tp)
		fullBytes += jsonSize(t, p)
		trimmedBytes += jsonSize(t, tp)
	}
	t.Logf("pods as served: %d bytes of JSON; as cached: %d", fullBytes, trimmedBytes)

	a, b := model.BuildPushContext(full, "1"), model.BuildPushContext(&trimmed, "1")
	if a.ConfigHash != b.ConfigHash {
		t.Errorf("config hash: %x from the pods, %x from the trimmed pods", a.ConfigHash, b.ConfigHash)
	}
	if !reflect.DeepEqual(a.Endpoints, b.Endpoints) {
		t.Errorf("endpoints differ:\n%+v\n%+v", a.Endpoints, b.Endpoints)
	}
	if len(a.Endpoints["reviews.shop.svc.cluster.local"]) != 2 || a.Endpoints["reviews.shop.svc.cluster.local"][0].ServiceAccount != "reviews-sa" {
		t.Errorf("the fixture does not exercise the pods: %+v", a.Endpoints)
	}
	for _, p := range full.Pods {
		proxy := &model.Proxy{IP: p.Status.PodIP, Namespace: p.Namespace}
		if got, want := proxy.WorkloadLabels(b), proxy.WorkloadLabels(a); !reflect.DeepEqual(got, want) || len(want) == 0 {
			t.Errorf("proxy %s labels: %v, want %v", proxy.IP, got, want)
		}
	}
	ma, mb := analysis.Analyze(full), analysis.Analyze(&trimmed)
	if !reflect.DeepEqual(ma, mb) {
		t.Errorf("analysis differs:\n%v\n%v", ma, mb)
	}
	if !strings.Contains(fmt.Sprint(ma), "pod") {
		t.Errorf("the fixture gives no analysis of the pods: %v", ma)
	}
}

func jsonSize(t *testing.T, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
