package model_test

import (
	"fmt"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// scopeMesh is benchMesh's 1000 services spread over namespaces of 50, with
// a VirtualService for every tenth and a DestinationRule for every fifth,
// each in its service's namespace and naming it by its short name, as
// users write them.
func scopeMesh() (*model.Inputs, []string) {
	in := benchMesh(false)
	var nss []string
	for i, svc := range in.Services {
		ns := fmt.Sprintf("ns-%02d", i/50)
		if i%50 == 0 {
			nss = append(nss, ns)
		}
		svc.Namespace, in.EndpointSlices[i].Namespace = ns, ns
		if i%10 == 0 {
			in.VirtualServices = append(in.VirtualServices, &networking.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns},
				Spec: apinet.VirtualService{Hosts: []string{svc.Name}, Http: []*apinet.HTTPRoute{{Route: []*apinet.HTTPRouteDestination{{Destination: &apinet.Destination{Host: svc.Name}}}}}}})
		}
		if i%5 == 0 {
			in.DestinationRules = append(in.DestinationRules, &networking.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns},
				Spec: apinet.DestinationRule{Host: svc.Name}})
		}
	}
	return in, nss
}

// BenchmarkScopes builds the scope of a sidecar in each of the 20
// namespaces, as the first full push after a configuration change does.
func BenchmarkScopes(b *testing.B) {
	in, nss := scopeMesh()
	for i := range b.N {
		pc := model.BuildPushContext(in, fmt.Sprint(i))
		for _, ns := range nss {
			if sc := pc.ScopeFor(&model.Proxy{Namespace: ns}); len(sc.Services) != 1000 {
				b.Fatalf("scope of %s sees %d services", ns, len(sc.Services))
			}
		}
	}
}

// BenchmarkScopesBuildOnly is BenchmarkScopes' push context alone: what
// is left of BenchmarkScopes once it is subtracted is the scopes.
func BenchmarkScopesBuildOnly(b *testing.B) {
	in, _ := scopeMesh()
	for i := range b.N {
		model.BuildPushContext(in, fmt.Sprint(i))
	}
}
