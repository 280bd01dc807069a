package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// BenchmarkBuildPodChange: the inputs brought up to date after one pod of
// 5000 changed, beside 1000 Services and EndpointSlices, as a rollout's
// step makes istiod do before each push.
func BenchmarkBuildPodChange(b *testing.B) {
	svcs, slices, pods := newIndexer(), newIndexer(), newIndexer()
	pod := func(i, gen int) any {
		o, err := trimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%04d-%d", i/5, i%5), Namespace: "bench",
			Labels: map[string]string{"app": fmt.Sprintf("svc-%04d", i/5), "pod-template-hash": fmt.Sprint(gen)}},
			Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		if err := svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}); err != nil {
			b.Fatal(err)
		}
		if err := slices.Add(slice(name, fmt.Sprintf("10.1.%d.%d", i/50, i%50*5+1))); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 5000 {
		if err := pods.Add(pod(i, 0)); err != nil {
			b.Fatal(err)
		}
	}
	l := &listers{services: svcs, slices: slices, pods: pods}
	probs := problems{}
	in := l.build(nil, everyKind(), probs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := pod(i%5000, i+1)
		if err := pods.Update(p); err != nil {
			b.Fatal(err)
		}
		in = l.build(in, dirtyWith(model.KindPod, p), probs)
	}
	if len(in.Pods) != 5000 {
		b.Fatalf("%d pods", len(in.Pods))
	}
}
