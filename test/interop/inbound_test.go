package interop

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// TestInboundConnectionManagerAsIstio: the HTTP connection manager of the
// chain a sidecar's virtualInbound listener gives a workload port that a
// service names HTTP is Istio 1.31's, field for field (as
// TestConnectionManagersAsIstio leaves out: Istio's own extension filters,
// tracing), with its route: the server name, client certificate details,
// and the inbound route's retry of resets before the request.
func TestInboundConnectionManagerAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := crdtest.Start(t)
	ns := netnstest.UniqueName("in-")
	withReviews(t, ctx, env, "10.0.0.69", ns)
	// The sidecar's own workload (adsAsSidecar's node: client-0 at
	// 10.1.2.9, app: client), and a service naming its port 8080 HTTP.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.70", Selector: map[string]string{"app": "client"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 9080, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client-0", Namespace: ns, Labels: map[string]string{"app": "client"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	created, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.9", PodIPs: []corev1.PodIP{{IP: "10.1.2.9"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	istio, skiff := bothControlPlanes(t, env, istiod)
	hasPort := func(l *listenerv3.Listener) bool { return portChain(l, 8080) != nil }
	istioVI := sidecarResource(t, ctx, istio, ns, "virtualInbound", hasPort)
	skiffVI := sidecarResource(t, ctx, skiff, ns, "virtualInbound", hasPort)
	// The workload port's chain, and the catch-all one for HTTP to ports
	// no service names.
	for _, port := range []uint32{8080, 0} {
		want := upstreamHCM(t, &listenerv3.Listener{Name: "istio", FilterChains: []*listenerv3.FilterChain{portChain(istioVI, port)}})
		got := upstreamHCM(t, &listenerv3.Listener{Name: "skiff", FilterChains: []*listenerv3.FilterChain{portChain(skiffVI, port)}})
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Errorf("virtualInbound, port %d: HTTP connection manager differs from Istio's (-Istio +Skiff):\n%s", port, d)
		}
	}
}

// portChain is l's first chain for destination port (0: none named)
// whose filters hold an HTTP connection manager, or nil.
func portChain(l *listenerv3.Listener, port uint32) *listenerv3.FilterChain {
	for _, fc := range l.GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() != port {
			continue
		}
		for _, f := range fc.GetFilters() {
			if f.GetName() == "envoy.filters.network.http_connection_manager" {
				return fc
			}
		}
	}
	return nil
}
