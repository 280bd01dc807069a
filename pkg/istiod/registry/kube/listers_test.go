package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestBuildKeepsUnchangedKinds: after an EndpointSlice changes, only the
// slices are listed again; services and pods are the same slices as
// before, and the changed slice keeps its place, so the push context is
// patched rather than rebuilt.
func TestBuildKeepsUnchangedKinds(t *testing.T) {
	svcs, slices, pods := newIndexer(), newIndexer(), newIndexer()
	for i := range 50 {
		name := fmt.Sprintf("svc-%02d", i)
		add(t, svcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.0.%d", i+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		add(t, slices, slice(name, fmt.Sprintf("10.1.0.%d", i+1)))
		add(t, pods, trimmed(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: "ns"},
			Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.1.0.%d", i+1)}}))
	}
	l := &listers{services: corelisters.NewServiceLister(svcs), slices: discoverylisters.NewEndpointSliceLister(slices),
		pods: podLister{pods}}
	problems := map[model.Kind][]error{}
	all := map[model.Kind]bool{}
	for _, k := range kinds {
		all[k] = true
	}
	first := l.build(nil, all, problems)
	for i := 1; i < len(first.EndpointSlices); i++ {
		if first.EndpointSlices[i-1].Name >= first.EndpointSlices[i].Name {
			t.Fatalf("slices not sorted by name: %s before %s", first.EndpointSlices[i-1].Name, first.EndpointSlices[i].Name)
		}
	}
	changed := slice("svc-17", "10.2.0.1")
	if err := slices.Update(changed); err != nil {
		t.Fatal(err)
	}
	next := l.build(first, map[model.Kind]bool{model.KindEndpointSlice: true}, problems)
	if &next.Services[0] != &first.Services[0] || &next.Pods[0] != &first.Pods[0] {
		t.Error("services or pods listed again after an EndpointSlice change")
	}
	for i, sl := range next.EndpointSlices {
		if want := first.EndpointSlices[i]; sl != want && (sl != changed || want.Name != "svc-17") {
			t.Fatalf("slice %d is %s, was %s: unchanged slices must keep their place", i, sl.Name, want.Name)
		}
	}
	pc := model.BuildPushContext(first, "1")
	pc2 := model.Rebuild(pc, next, "2")
	if c := pc2.Diff(pc); c.Full || len(c.Hosts) != 1 {
		t.Errorf("diff after one slice changed: full %v, %d hosts; want one host's endpoints", c.Full, len(c.Hosts))
	}
}

// TestSameTrimmedPod: a status change istiod does not keep is no change;
// a new label or address is.
func TestSameTrimmedPod(t *testing.T) {
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1", Labels: map[string]string{"app": "a"}},
		Status: corev1.PodStatus{PodIP: "10.1.0.1", ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 0}}}}
	trimmed := func(p *corev1.Pod) any {
		o, err := trimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	restarted := base.DeepCopy()
	restarted.ResourceVersion, restarted.Status.ContainerStatuses[0].RestartCount = "2", 1
	relabelled := base.DeepCopy()
	relabelled.ResourceVersion, relabelled.Labels["version"] = "3", "v2"
	moved := base.DeepCopy()
	moved.ResourceVersion, moved.Status.PodIP = "4", "10.1.0.2"
	for _, c := range []struct {
		name string
		p    *corev1.Pod
		same bool
	}{{"restart count", restarted, true}, {"label", relabelled, false}, {"pod IP", moved, false}} {
		if got := sameTrimmedPod(trimmed(base), trimmed(c.p)); got != c.same {
			t.Errorf("%s changed: same %v, want %v", c.name, got, c.same)
		}
	}
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// trimmed is p as the pod informer caches it.
func trimmed(t *testing.T, p *corev1.Pod) any {
	t.Helper()
	o, err := trimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func add(t *testing.T, ix cache.Indexer, obj any) {
	t.Helper()
	if err := ix.Add(obj); err != nil {
		t.Fatal(err)
	}
}

func slice(svc, ip string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc, Namespace: "ns", Labels: map[string]string{"kubernetes.io/service-name": svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(80))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
	}
}
