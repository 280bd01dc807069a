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
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/injecttest"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestTrimKeepsWhatIstiodReads builds the model and runs the analysers on
// injected, running pods as the informer caches them: trimmed to a
// model.Pod, read back through the pod lister. The endpoints must get their
// service accounts and labels, proxies their labels, and the analysers the
// pods' proxy types.
func TestTrimKeepsWhatIstiodReads(t *testing.T) {
	in, err := injecttest.Injector()
	if err != nil {
		t.Fatal(err)
	}
	full := &model.Inputs{}
	var served []*corev1.Pod
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
				pod.Annotations[model.InjectTemplatesAnnotation] = "grpc-agent"
			}
			pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:podIP":{}}}`)}}}
			served = append(served, pod)
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
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	var fullBytes, trimmedBytes int
	for _, p := range served {
		o := trimmed(t, p.DeepCopy())
		c := o.(*cachedPod)
		if want := (metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion}); !reflect.DeepEqual(c.ObjectMeta, want) {
			t.Errorf("cached metadata %+v, want only the name, namespace and resourceVersion", c.ObjectMeta)
		}
		if c.invalid != nil {
			t.Errorf("pod %s: %v", p.Name, c.invalid)
		}
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
		fullBytes += jsonSize(t, p)
		trimmedBytes += jsonSize(t, c.pod)
	}
	t.Logf("pods as served: %d bytes of JSON; as cached: %d", fullBytes, trimmedBytes)
	var problems map[string]error
	full.Pods, problems = listAll(model.KindPod, store, cachedPodOf)
	if len(full.Pods) != len(served) || len(problems) > 0 {
		t.Fatalf("listed %d of %d pods, problems %v", len(full.Pods), len(served), problems)
	}

	a := model.BuildPushContext(full, "1")
	eps := a.Endpoints["reviews.shop.svc.cluster.local"]
	if len(eps) != 2 || eps[0].ServiceAccount != "reviews-sa" || eps[1].ServiceAccount != "reviews-sa" ||
		eps[0].Labels["app"] != "reviews" || eps[1].Labels["app"] != "reviews" || eps[0].Locality.Zone != "zone-b" {
		t.Errorf("endpoints do not carry their pods' service accounts, labels and zone: %+v", eps)
	}
	for _, p := range served {
		proxy := &model.Proxy{IP: p.Status.PodIP, Namespace: p.Namespace}
		if got := proxy.WorkloadLabels(a); !reflect.DeepEqual(got, p.Labels) {
			t.Errorf("proxy %s labels: %v, want %v", proxy.IP, got, p.Labels)
		}
	}
	ma := analysis.Analyze(full)
	if m := fmt.Sprint(ma); !strings.Contains(m, "proxyless") || !strings.Contains(m, "(1 pod)") {
		t.Errorf("the analysis does not tell the proxyless pod by its templates: %v", ma)
	}
}

// TestPodOfKeepsEveryAddress: a dual-stack pod is found by either address,
// also when the kubelet has written only status.podIP.
func TestPodOfKeepsEveryAddress(t *testing.T) {
	for _, c := range []struct {
		status corev1.PodStatus
		want   []string
	}{
		{corev1.PodStatus{PodIP: "10.1.0.1", PodIPs: []corev1.PodIP{{IP: "10.1.0.1"}, {IP: "fd00::1"}}}, []string{"10.1.0.1", "fd00::1"}},
		{corev1.PodStatus{PodIP: "10.1.0.1"}, []string{"10.1.0.1"}},
		{corev1.PodStatus{}, nil},
	} {
		if got := model.PodOf(&corev1.Pod{Status: c.status}).IPs; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: IPs %v, want %v", c.status, got, c.want)
		}
	}
}

func jsonSize(t *testing.T, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
