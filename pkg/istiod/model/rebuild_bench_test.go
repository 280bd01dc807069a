package model_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// benchMesh is 1000 services of 5 endpoints each, at distinct addresses;
// with pods, each endpoint names its pod by targetRef, and the pods are
// listed sorted, as the kube registry lists them.
func benchMesh(pods bool) *model.Inputs {
	in := &model.Inputs{}
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.100.%d.%d", i/250, i%250+1), Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}})
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{"kubernetes.io/service-name": name}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}}
		for j := range 5 {
			ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i%250, i/250*5+j+1)}}
			if pods {
				pod := fmt.Sprintf("%s-%d", name, j)
				ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: pod}
				in.Pods = append(in.Pods, &model.Pod{Name: pod, Namespace: "bench", ServiceAccount: name, IPs: ep.Addresses,
					Labels: map[string]string{"app": name, "pod-template-hash": "a"}})
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		in.EndpointSlices = append(in.EndpointSlices, sl)
	}
	return in
}

func BenchmarkRebuildEndpointChange(b *testing.B) {
	in := benchMesh(false)
	prev := model.BuildPushContext(in, "0")
	b.ResetTimer()
	for i := range b.N {
		next := *in
		next.EndpointSlices = append([]*discoveryv1.EndpointSlice(nil), in.EndpointSlices...)
		c := in.EndpointSlices[i%1000].DeepCopy()
		c.Endpoints[0].Addresses[0] = "10.9.9.9"
		next.EndpointSlices[i%1000] = c
		pc := model.Rebuild(prev, &next, "1")
		if ch := pc.Diff(prev); ch.Full || len(ch.Hosts) != 1 {
			b.Fatalf("change %+v", ch)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkRebuildPodChange: one pod of the 5000 behind 1000 services
// written again with a new label, as a rollout's step writes its pod, in
// the sorted list the kube registry keeps: the push context rebuilt and
// its change found.
func BenchmarkRebuildPodChange(b *testing.B) {
	in := benchMesh(true)
	prev := model.BuildPushContext(in, "0")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		next := *in
		next.Pods = slices.Clone(in.Pods)
		p := *in.Pods[i%len(in.Pods)]
		p.Labels = map[string]string{"app": p.Labels["app"], "pod-template-hash": fmt.Sprint(i)}
		next.Pods[i%len(in.Pods)] = &p
		pc := model.Rebuild(prev, &next, "1")
		if ch := pc.Diff(prev); ch.Full || len(ch.Hosts) != 1 || len(ch.Proxies) != 1 {
			b.Fatalf("change %+v", ch)
		}
		prev, in = pc, &next
	}
}
