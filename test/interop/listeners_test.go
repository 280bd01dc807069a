package interop

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3" // to compare Istio's
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// TestConnectionManagersAsIstio: the HTTP connection manager of a
// sidecar's outbound listener for an HTTP port is Istio 1.31's, field for
// field, as its own pilot-discovery writes it on the same API server and
// mesh config: WebSocket upgrades, no stream idle timeout, path
// normalisation, 100-continue, request IDs, the route configuration's
// source, and the HTTP filters Skiff configures in Istio's order. Left out
// of the comparison: the filters of Istio's own Envoy build (istio.*) and
// those that feed its telemetry (gRPC stats), and the tracing settings,
// which Skiff does not configure.
func TestConnectionManagersAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := crdtest.Start(t)
	ns := netnstest.UniqueName("hcm-")
	withReviews(t, ctx, env, "10.0.0.68", ns)
	istio, skiff := bothControlPlanes(t, env, istiod)
	const name = "0.0.0.0_9080"
	want := upstreamHCM(t, sidecarResource[listenerv3.Listener](t, ctx, istio, ns, name, nil))
	got := upstreamHCM(t, sidecarResource[listenerv3.Listener](t, ctx, skiff, ns, name, nil))
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("listener %s: HTTP connection manager differs from Istio's (-Istio +Skiff):\n%s", name, d)
	}
}

// upstreamHCM is the HTTP connection manager of l's first chain that has
// one, without what upstream Envoy does not run or Skiff does not
// configure (see TestConnectionManagersAsIstio).
func upstreamHCM(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			h := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig().UnmarshalTo(h) != nil {
				continue
			}
			var kept []*hcmv3.HttpFilter
			for _, hf := range h.GetHttpFilters() {
				if name := hf.GetName(); len(name) < 6 || name[:6] != "istio." && name != "envoy.filters.http.grpc_stats" {
					kept = append(kept, hf)
				}
			}
			h.HttpFilters, h.Tracing = kept, nil
			return h
		}
	}
	t.Fatalf("listener %s has no HTTP connection manager", l.GetName())
	return nil
}
