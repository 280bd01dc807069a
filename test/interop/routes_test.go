package interop

import (
	"context"
	"slices"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// TestRouteDomainsAsIstio: the virtual host a sidecar's outbound route
// configuration gives a service, with a cluster IP or headless, answers to
// the names Istio 1.31's own pilot-discovery gives it, on the same API
// server, from the service's namespace (where the bare name is one) and
// from another; and the route configuration's options, the port ignored in
// host matching among them, are Istio's.
func TestRouteDomainsAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := crdtest.Start(t)
	svcNS, otherNS := netnstest.UniqueName("rt-svc-"), netnstest.UniqueName("rt-other-")
	withReviews(t, ctx, env, "10.0.0.61", svcNS, otherNS)
	// A headless service: its pods' names are under its names.
	db := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: svcNS},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if _, err := env.Client.CoreV1().Services(svcNS).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	istioPlain, skiffPlain := bothControlPlanes(t, env, istiod)
	for _, ns := range []string{svcNS, otherNS} {
		for _, svc := range []string{"reviews", "db"} {
			vhost := svc + "." + svcNS + ".svc.cluster.local:9080"
			want := outboundRoute(t, ctx, istioPlain, ns, "9080", vhost)
			got := outboundRoute(t, ctx, skiffPlain, ns, "9080", vhost)
			if !slices.Equal(got.domains, want.domains) {
				t.Errorf("sidecar in %s: %s answers to %q; Istio's to %q", ns, vhost, got.domains, want.domains)
			}
			if got.options != want.options {
				t.Errorf("sidecar in %s: route configuration 9080 options %+v; Istio's %+v", ns, got.options, want.options)
			}
		}
	}
}

// routeView is what TestRouteDomainsAsIstio compares of a route
// configuration: one virtual host's domains, sorted, and the options.
type routeView struct {
	domains []string
	options routeOptions
}

type routeOptions struct {
	ignorePort, validateClustersSet, validateClusters bool
	maxDirectResponse                                 uint32
}

// outboundRoute is what routeConfig returns, as a routeView of vhost.
func outboundRoute(t *testing.T, ctx context.Context, addr, ns, name, vhost string) routeView {
	t.Helper()
	rc := routeConfig(t, ctx, addr, ns, name, vhost, "")
	vh := virtualHost(rc, vhost)
	return routeView{domains: slices.Sorted(slices.Values(vh.GetDomains())), options: routeOptions{
		ignorePort:          rc.GetIgnorePortInHostMatching(),
		validateClustersSet: rc.GetValidateClusters() != nil,
		validateClusters:    rc.GetValidateClusters().GetValue(),
		maxDirectResponse:   rc.GetMaxDirectResponseBodySizeBytes().GetValue(),
	}}
}

// routeConfig asks the plaintext xDS address for route configuration name
// as a sidecar in namespace ns, and returns it once it holds virtual host
// vhost, with a route named route unless that is "".
func routeConfig(t *testing.T, ctx context.Context, addr, ns, name, vhost, route string) *routev3.RouteConfiguration {
	t.Helper()
	return sidecarResource(t, ctx, addr, ns, name, func(rc *routev3.RouteConfiguration) bool {
		vh := virtualHost(rc, vhost)
		return vh != nil && (route == "" || slices.ContainsFunc(vh.GetRoutes(), func(r *routev3.Route) bool { return r.GetName() == route }))
	})
}

// sidecarResource asks the plaintext xDS address for the resource name of
// T's type as a sidecar in namespace ns (state of the world, every
// resource of the type), and returns it once ready says it is complete,
// acknowledging the responses before.
func sidecarResource[T any, PT interface {
	*T
	proto.Message
}](t *testing.T, ctx context.Context, addr, ns, name string, ready func(PT) bool) PT {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, node := adsAsSidecar(t, sctx, addr, ns)
	typeURL := "type.googleapis.com/" + string(PT(new(T)).ProtoReflect().Descriptor().FullName())
	req := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL}
	if typeURL == rdsType {
		req.ResourceNames = []string{name}
	}
	for {
		if err := stream.Send(req); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: %s %s as a sidecar in %s: %v", addr, typeURL, name, ns, err)
		}
		for _, a := range resp.GetResources() {
			m := PT(new(T))
			if a.UnmarshalTo(m) != nil || resourceName(m) != name {
				continue
			}
			if ready == nil || ready(m) {
				return m
			}
		}
		req = &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: req.ResourceNames, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	}
}

const rdsType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"

// resourceName is the name field of an xDS resource.
func resourceName(m proto.Message) string {
	f := m.ProtoReflect().Descriptor().Fields().ByName("name")
	if f == nil {
		return ""
	}
	return m.ProtoReflect().Get(f).String()
}

// virtualHost is rc's virtual host named name, or nil.
func virtualHost(rc *routev3.RouteConfiguration, name string) *routev3.VirtualHost {
	for _, vh := range rc.GetVirtualHosts() {
		if vh.GetName() == name {
			return vh
		}
	}
	return nil
}
