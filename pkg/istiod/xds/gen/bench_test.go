package gen_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// benchMesh is the sample mesh with n more services in namespace default,
// each with five endpoints; every tenth is headless.
func benchMesh(b testing.TB, n int) *model.Inputs {
	in := sampleInputs(b)
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		ip := fmt.Sprintf("10.100.%d.%d", i/250, i%250+1)
		if i%10 == 0 {
			ip = corev1.ClusterIPNone
		}
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}})
		in.EndpointSlices = append(in.EndpointSlices, benchSlice(name, i, "1"))
	}
	return in
}

func benchSlice(name string, i int, last string) *discoveryv1.EndpointSlice {
	port, pname := int32(8080), "http"
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"kubernetes.io/service-name": name}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &pname, Port: &port}}}
	for j := range 5 {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d%s", i%250, j+1, last)}})
	}
	return sl
}

// BenchmarkGenerateCached asks for every type of the sidecars once more:
// everything is cached.
func BenchmarkGenerateCached(b *testing.B) {
	pc := model.BuildPushContext(benchMesh(b, 500), "1")
	var ps []*model.Proxy
	for _, c := range proxies[:3] {
		ps = append(ps, proxyFor(b, c))
	}
	for b.Loop() {
		for _, p := range ps {
			for _, typ := range gen.PushOrder() {
				if _, err := gen.Generate(pc, p, typ, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkEndpointChange is an endpoint-only push: move one endpoint of
// a service with a cluster IP, or of a headless one (whose name table
// entries then change), rebuild, inherit the cache and generate every type
// for the sidecars again.
func BenchmarkEndpointChange(b *testing.B) {
	for _, bc := range []struct {
		name     string
		headless bool
	}{{"clusterIP", false}, {"headless", true}} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 500
			in := benchMesh(b, n)
			prev := model.BuildPushContext(in, "0")
			var ps []*model.Proxy
			for _, c := range proxies[:3] {
				ps = append(ps, proxyFor(b, c))
			}
			generateAll := func(pc *model.PushContext) {
				for _, p := range ps {
					for _, typ := range gen.PushOrder() {
						if _, err := gen.Generate(pc, p, typ, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			generateAll(prev)
			// The services moved in turn: every tenth is headless.
			var moved []int
			for i := range n {
				if (i%10 == 0) == bc.headless {
					moved = append(moved, i)
				}
			}
			round := 0
			for b.Loop() {
				j := moved[round%len(moved)]
				next := *in
				next.EndpointSlices = append([]*discoveryv1.EndpointSlice(nil), in.EndpointSlices...)
				next.EndpointSlices[len(next.EndpointSlices)-n+j] = benchSlice(fmt.Sprintf("svc-%04d", j), j, fmt.Sprint(round/len(moved)%2))
				pc := model.Rebuild(prev, &next, fmt.Sprint(round))
				change := pc.Diff(prev)
				if change.Full || len(change.Hosts) != 1 {
					b.Fatalf("change %+v", change)
				}
				pc.Inherit(prev, change)
				generateAll(pc)
				prev, in = pc, &next
				round++
			}
		})
	}
}
