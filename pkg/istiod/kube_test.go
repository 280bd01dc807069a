package istiod_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// TestKubernetesSource runs istiod against a real kube-apiserver with a
// kubeconfig and checks a sidecar gets the cluster's services over xDS.
func TestKubernetesSource(t *testing.T) {
	env, ctx := crdtest.Start(t)
	port := int32(9080)
	name := "grpc"
	if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: name, Port: port}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-1", Namespace: "default", Labels: map[string]string{"kubernetes.io/service-name": "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startIstiod(t, istiod.Config{Kubeconfig: env.Kubeconfig})

	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := xdstest.DialSotW(cctx, d.Addr("grpc"), xdstest.Node("sidecar~10.1.0.9~client.default~default.svc.cluster.local", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "outbound|9080||reviews.default.svc.cluster.local"
	if err := c.Request(gen.EndpointType, []string{want}, "", "", nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.Recv(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != 1 {
		t.Fatalf("EDS for %s: %d resources", want, len(r.GetResources()))
	}
	if err := xdstest.Check(xdstest.Config{gen.EndpointType: r.GetResources()}, gen.ClusterType, gen.RouteType, gen.EndpointType); err != nil {
		t.Fatal(err)
	}
}
