package gen_test

import (
	"fmt"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// BenchmarkFullPushNamespaces is the generation of a full push to
// sidecars in 1 and in 20 namespaces: a new push context, then every type
// for one sidecar per namespace, each namespace its own scope. The mesh is
// benchMesh's 1000 services with a VirtualService for every tenth; every
// scope sees every service.
func BenchmarkFullPushNamespaces(b *testing.B) {
	in := benchMesh(b, 1000)
	for i, svc := range in.Services {
		if i%10 == 0 {
			in.VirtualServices = append(in.VirtualServices, &networking.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace},
				Spec: apinet.VirtualService{Hosts: []string{svc.Name}, Http: []*apinet.HTTPRoute{{Route: []*apinet.HTTPRouteDestination{{Destination: &apinet.Destination{Host: svc.Name}}}}}}})
		}
	}
	for _, nss := range []int{1, 20} {
		b.Run(fmt.Sprintf("namespaces=%d", nss), func(b *testing.B) {
			var ps []*model.Proxy
			for i := range nss {
				ps = append(ps, proxyFor(b, proxyCase{id: fmt.Sprintf("sidecar~10.9.0.%d~app-0.ns-%02d~ns-%02d.svc.cluster.local", i+1, i, i)}))
			}
			round := 0
			for b.Loop() {
				pc := model.BuildPushContext(in, fmt.Sprint(round))
				round++
				for _, p := range ps {
					for _, typ := range gen.PushOrder() {
						if _, err := gen.Generate(pc, p, typ, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
