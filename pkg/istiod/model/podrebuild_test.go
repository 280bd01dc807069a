package model_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// podMesh is a small mesh whose endpoints find their pods both ways: the
// even endpoints by targetRef, the odd ones by address only.
type podMesh struct {
	services []*corev1.Service
	slices   []*discoveryv1.EndpointSlice
	pods     []*model.Pod
}

const podMeshServices, podMeshPods = 4, 12

func newPodMesh() *podMesh {
	m := &podMesh{}
	for s := range podMeshServices {
		name := fmt.Sprintf("s%d", s)
		m.services = append(m.services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.0.%d", 10+s), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	}
	for p := range podMeshPods {
		m.pods = append(m.pods, podMeshPod(p, fmt.Sprintf("10.1.0.%d", p+1), "sa", "v1"))
	}
	for s := range podMeshServices {
		m.slices = append(m.slices, m.slice(s, []int{3 * s, 3*s + 1, 3*s + 2}))
	}
	return m
}

func podMeshPod(i int, ip, sa, version string) *model.Pod {
	return &model.Pod{Name: fmt.Sprintf("p%d", i), Namespace: "shop",
		Labels: map[string]string{"app": "shop", "version": version}, ServiceAccount: sa, IPs: []string{ip}}
}

// podIP is a pod's first address ("" for none).
func podIP(p *model.Pod) string {
	if len(p.IPs) == 0 {
		return ""
	}
	return p.IPs[0]
}

// slice is service s's EndpointSlice over the pods at indexes eps, with
// the addresses the pods have now.
func (m *podMesh) slice(s int, eps []int) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("s%d-1", s), Namespace: "shop", Labels: map[string]string{"kubernetes.io/service-name": fmt.Sprintf("s%d", s)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
	}
	for _, i := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", i+1)}}
		if i%2 == 0 {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("p%d", i)}
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return sl
}

func (m *podMesh) inputs() *model.Inputs {
	return &model.Inputs{Services: m.services, EndpointSlices: slices.Clone(m.slices), Pods: slices.Clone(m.pods)}
}

// mutate changes one pod or one slice, as a registry would: a changed
// object is a new pointer, everything else keeps its own.
func (m *podMesh) mutate(r *rand.Rand) {
	i := r.IntN(podMeshPods)
	old := m.pods[i]
	switch r.IntN(6) {
	case 0: // the same pod, written again
		p := *old
		m.pods[i] = &p
	case 1:
		m.pods[i] = podMeshPod(i, podIP(old), old.ServiceAccount, fmt.Sprintf("v%d", r.IntN(3)))
	case 2:
		m.pods[i] = podMeshPod(i, podIP(old), fmt.Sprintf("sa%d", r.IntN(2)), old.Labels["version"])
	case 3: // an address no endpoint has, or back
		ip := fmt.Sprintf("10.2.0.%d", i+1)
		if podIP(old) == ip {
			ip = fmt.Sprintf("10.1.0.%d", i+1)
		}
		m.pods[i] = podMeshPod(i, ip, old.ServiceAccount, old.Labels["version"])
	case 4: // gone, or back
		if old.Namespace == "elsewhere" {
			m.pods[i] = podMeshPod(i, fmt.Sprintf("10.1.0.%d", i+1), "sa", "v1")
		} else {
			m.pods[i] = &model.Pod{Name: fmt.Sprintf("gone%d", i), Namespace: "elsewhere"}
		}
	case 5: // a service's slice rewired over other pods
		s := r.IntN(podMeshServices)
		m.slices[s] = m.slice(s, []int{r.IntN(podMeshPods), r.IntN(podMeshPods)})
	}
}

// TestRebuildAfterPodChangesMatchesBuild: the endpoints a push context
// rebuilt from its predecessor after pod and slice changes are those one
// built from scratch would have, and so are the proxies its change names,
// through a long run of random changes. The pods are listed in the mesh's
// order, and sorted by namespace and name as the kube registry lists
// them, which lets the pod index be patched.
func TestRebuildAfterPodChangesMatchesBuild(t *testing.T) {
	for _, sorted := range []bool{false, true} {
		t.Run(fmt.Sprint("sorted=", sorted), func(t *testing.T) { rebuildAfterPodChanges(t, sorted) })
	}
}

func rebuildAfterPodChanges(t *testing.T, sorted bool) {
	r := rand.New(rand.NewPCG(1, 2))
	m := newPodMesh()
	inputs := func() *model.Inputs {
		in := m.inputs()
		if sorted {
			slices.SortFunc(in.Pods, func(a, b *model.Pod) int {
				return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
			})
		}
		return in
	}
	prev := model.BuildPushContext(inputs(), "0")
	for step := range 500 {
		for range 1 + r.IntN(2) {
			m.mutate(r)
		}
		in := inputs()
		pc := model.Rebuild(prev, in, fmt.Sprint(step+1))
		want := model.BuildPushContext(in, "fresh")
		if got, want := pc.Diff(prev), want.Diff(prev); got.Full != want.Full || !maps.Equal(got.Hosts, want.Hosts) || !maps.Equal(got.Proxies, want.Proxies) {
			t.Fatalf("step %d: change %+v, want %+v", step, got, want)
		}
		if !reflect.DeepEqual(pc.Endpoints, want.Endpoints) {
			t.Fatalf("step %d: rebuilt endpoints\n%+v\nwant\n%+v", step, pc.Endpoints, want.Endpoints)
		}
		if !reflect.DeepEqual(pc.EndpointHash, want.EndpointHash) {
			t.Fatalf("step %d: rebuilt endpoint hashes %v, want %v", step, pc.EndpointHash, want.EndpointHash)
		}
		prev = pc
	}
}

// TestPodChangeRecomputesItsServicesOnly: after one pod changes, the
// endpoints of the services that do not name it are prev's, not
// recomputed.
func TestPodChangeRecomputesItsServicesOnly(t *testing.T) {
	m := newPodMesh()
	prev := model.BuildPushContext(m.inputs(), "0")
	m.pods[4] = podMeshPod(4, podIP(m.pods[4]), "sa", "v2") // an endpoint of s1
	pc := model.Rebuild(prev, m.inputs(), "1")
	for s := range podMeshServices {
		host := fmt.Sprintf("s%d.shop.svc.cluster.local", s)
		shared := &pc.Endpoints[host][0] == &prev.Endpoints[host][0]
		if shared != (s != 1) {
			t.Errorf("%s: endpoints shared with the previous push context: %v, want %v", host, shared, s != 1)
		}
	}
	if got := pc.Endpoints["s1.shop.svc.cluster.local"][1].Labels["version"]; got != "v2" {
		t.Errorf("s1's second endpoint has version %q, want v2", got)
	}
}
