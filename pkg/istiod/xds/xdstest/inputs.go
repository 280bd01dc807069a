package xdstest

import (
	"errors"
	"slices"
	"testing"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

// With returns a copy of in with the objects of yaml (the file registry's
// format) added, or replacing those of the same kind, namespace and name.
func With(t testing.TB, in *model.Inputs, yaml string) *model.Inputs {
	t.Helper()
	objs, errs := file.Parse("test.yaml", []byte(yaml))
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	out := *in
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Service:
			out.Services = replace(out.Services, v)
		case *discoveryv1.EndpointSlice:
			out.EndpointSlices = replace(out.EndpointSlices, v)
		case *corev1.Pod:
			out.Pods = replace(out.Pods, model.PodOf(v))
		case *networking.ServiceEntry:
			out.ServiceEntries = replace(out.ServiceEntries, v)
		case *networking.WorkloadEntry:
			out.WorkloadEntries = replace(out.WorkloadEntries, v)
		case *networking.VirtualService:
			out.VirtualServices = replace(out.VirtualServices, v)
		case *networking.DestinationRule:
			out.DestinationRules = replace(out.DestinationRules, v)
		case *networking.Sidecar:
			out.Sidecars = replace(out.Sidecars, v)
		case *security.PeerAuthentication:
			out.PeerAuthentications = replace(out.PeerAuthentications, v)
		case *security.AuthorizationPolicy:
			out.AuthorizationPolicies = replace(out.AuthorizationPolicies, v)
		case *security.RequestAuthentication:
			out.RequestAuthentications = replace(out.RequestAuthentications, v)
		default:
			t.Fatalf("xdstest.With: unsupported %T", o)
		}
	}
	return &out
}

func replace[T model.Named](list []T, o T) []T {
	out := slices.Clone(list)
	for i, x := range out {
		if x.GetNamespace() == o.GetNamespace() && x.GetName() == o.GetName() {
			out[i] = o
			return out
		}
	}
	return append(out, o)
}

// DBHost is the headless service of HeadlessDB.
const DBHost = "db.default.svc.cluster.local"

// HeadlessDB is a headless Kubernetes service, db.default, whose endpoints
// DBSlice gives: the case where name tables follow endpoints.
const HeadlessDB = `apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: tcp, port: 5432}]
`

// DBSlice is HeadlessDB's one EndpointSlice, with one endpoint at ip.
func DBSlice(ip string) string {
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: default, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp, port: 5432}]
endpoints:
- {addresses: ["` + ip + `"]}
`
}
