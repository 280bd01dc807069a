package kube

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	apinet "istio.io/api/networking/v1"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	l := &listers{services: svcs, slices: slices, pods: pods}
	probs := problems{}
	first := l.build(nil, everyKind(), probs)
	for i := 1; i < len(first.EndpointSlices); i++ {
		if first.EndpointSlices[i-1].Name >= first.EndpointSlices[i].Name {
			t.Fatalf("slices not sorted by name: %s before %s", first.EndpointSlices[i-1].Name, first.EndpointSlices[i].Name)
		}
	}
	changed := slice("svc-17", "10.2.0.1")
	if err := slices.Update(changed); err != nil {
		t.Fatal(err)
	}
	next := l.build(first, dirtyWith(model.KindEndpointSlice, changed), probs)
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

// dirtyWith is kind's change of objs.
func dirtyWith(kind model.Kind, objs ...any) map[model.Kind]*changes {
	ch := &changes{}
	for _, o := range objs {
		ch.add(o)
	}
	return map[model.Kind]*changes{kind: ch}
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

// TestPatchMatchesListAll: random batches of adds, updates (valid and
// invalid) and deletes (some as tombstones), each patched into the
// previous inputs, give the same list, pointer for pointer, and the same
// problems as listing the store whole; the previous inputs stay as they
// were. A batch past maxPatched lists the kind again.
func TestPatchMatchesListAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 4))
	store := newIndexer()
	// "a" sorts before "a-b" as a namespace, after it as a key prefix.
	namespaces := []string{"a", "a-b", "b", "default"}
	vs := func(ns, name string, valid bool) *networking.VirtualService {
		w := int32(-10) // invalid: negative
		if valid {
			w = 50
		}
		return &networking.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: apinet.VirtualService{Hosts: []string{"reviews"}, Http: []*apinet.HTTPRoute{{Route: []*apinet.HTTPRouteDestination{
				{Destination: &apinet.Destination{Host: "reviews", Subset: "v1"}, Weight: 50},
				{Destination: &apinet.Destination{Host: "reviews", Subset: "v2"}, Weight: w},
			}}}}}
	}
	l := &listers{virtualServices: store}
	probs := problems{}
	in := l.build(nil, map[model.Kind]*changes{model.KindVirtualService: &changes{all: true}}, probs)
	relisted := 0
	for batch := range 300 {
		ch := &changes{}
		n, names := 1+rng.IntN(12), 40
		if batch%50 == 49 {
			n, names = 2*maxPatched, 1000
		}
		for range n {
			ns, name := namespaces[rng.IntN(len(namespaces))], fmt.Sprintf("vs-%d", rng.IntN(names))
			key := ns + "/" + name
			old, exists, _ := store.GetByKey(key)
			switch op := rng.IntN(10); {
			case exists && op < 3:
				if err := store.Delete(old); err != nil {
					t.Fatal(err)
				}
				if op == 0 {
					ch.add(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
				} else {
					ch.add(old)
				}
			default:
				o := vs(ns, name, rng.IntN(4) > 0)
				if err := store.Update(o); err != nil { // adds when absent
					t.Fatal(err)
				}
				ch.add(o)
			}
		}
		if ch.all {
			relisted++
		}
		before := slices.Clone(in.VirtualServices)
		next := l.build(in, map[model.Kind]*changes{model.KindVirtualService: ch}, probs)
		if !slices.Equal(in.VirtualServices, before) {
			t.Fatalf("batch %d: the previous inputs changed", batch)
		}
		want, wantProbs := listAll(model.KindVirtualService, store, accepted[*networking.VirtualService])
		if !slices.Equal(next.VirtualServices, want) {
			t.Fatalf("batch %d (%d changes, all %v): patched %s, listed %s", batch, n, ch.all, keysOf(next.VirtualServices), keysOf(want))
		}
		if got := fmt.Sprint(probs.list()); got != fmt.Sprint(problems{model.KindVirtualService: wantProbs}.list()) {
			t.Fatalf("batch %d: problems %s, want %v", batch, got, wantProbs)
		}
		in = next
	}
	if len(in.VirtualServices) == 0 || len(probs[model.KindVirtualService]) == 0 || relisted == 0 {
		t.Fatalf("the run ended with %d objects, %d problems and %d lists: it tested little", len(in.VirtualServices), len(probs[model.KindVirtualService]), relisted)
	}
}

func keysOf[T model.Named](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetNamespace() + "/" + o.GetName()
	}
	return out
}
