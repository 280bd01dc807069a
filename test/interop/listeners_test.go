package interop

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3" // to compare Istio's
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/formatter/req_without_query/v3"
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
// normalisation, 100-continue, request IDs, proxy headers, access logs,
// the route configuration's source, and the HTTP filters Skiff configures
// in Istio's order; and so are virtualOutbound's own access log and its
// passthrough and blackhole chains' TCP proxies. Once with the mesh config of Istio's
// chart, once with a text access log and proxy headers set, once with a
// JSON access log. Left out of the comparison: the filters of Istio's own
// Envoy build (istio.*) and those that feed its telemetry (gRPC stats),
// and the tracing settings, which Skiff does not configure.
func TestConnectionManagersAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	for _, tc := range []struct {
		name string
		mesh map[string]any
	}{
		{name: "chart"},
		{name: "text-log", mesh: map[string]any{
			"accessLogFile":     "/dev/stdout",
			"pathNormalization": map[string]any{"normalization": "MERGE_SLASHES"},
			"defaultConfig": map[string]any{"proxyHeaders": map[string]any{
				"server": map[string]any{"disabled": true}, "requestId": map[string]any{"disabled": true},
				"xForwardedPort": map[string]any{"enabled": true}, "envoyDebugHeaders": map[string]any{"disabled": true}}},
		}},
		{name: "json-log", mesh: map[string]any{
			"accessLogFile": "/tmp/access.log", "accessLogEncoding": "JSON",
			"accessLogFormat":   `{"path": "%REQ_WITHOUT_QUERY(:PATH)%", "code": "%RESPONSE_CODE%"}`,
			"pathNormalization": map[string]any{"normalization": "DECODE_AND_MERGE_SLASHES"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, ctx := crdtest.Start(t)
			ns := netnstest.UniqueName("hcm-")
			withReviews(t, ctx, env, "10.0.0.68", ns)
			istio, skiff := bothControlPlanesMesh(t, env, istiod, meshWith(t, tc.mesh))
			const name = "0.0.0.0_9080"
			want := upstreamHCM(t, sidecarResource[listenerv3.Listener](t, ctx, istio, ns, name, nil))
			got := upstreamHCM(t, sidecarResource[listenerv3.Listener](t, ctx, skiff, ns, name, nil))
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Errorf("listener %s: HTTP connection manager differs from Istio's (-Istio +Skiff):\n%s", name, d)
			}
			wantVO := sidecarResource[listenerv3.Listener](t, ctx, istio, ns, "virtualOutbound", nil)
			gotVO := sidecarResource[listenerv3.Listener](t, ctx, skiff, ns, "virtualOutbound", nil)
			if d := cmp.Diff(wantVO.GetAccessLog(), gotVO.GetAccessLog(), protocmp.Transform()); d != "" {
				t.Errorf("virtualOutbound's access log differs from Istio's (-Istio +Skiff):\n%s", d)
			}
			// Istio's catch-all is a chain without a match, Skiff's the
			// default chain: Skiff's virtualOutbound also has chains by
			// destination port, which Envoy would try alone for their ports.
			for _, chains := range [][2]string{{"virtualOutbound-catchall-tcp", "PassthroughFilterChain"}, {"virtualOutbound-blackhole", "virtualOutbound-blackhole"}} {
				if d := cmp.Diff(chainProxy(t, wantVO, chains[0]), chainProxy(t, gotVO, chains[1]), protocmp.Transform()); d != "" {
					t.Errorf("virtualOutbound's %s TCP proxy differs from Istio's (-Istio +Skiff):\n%s", chains[0], d)
				}
			}
		})
	}
}

// chainProxy is the TCP proxy of l's chain named name (or, for a name of
// Skiff's, its default chain of that name).
func chainProxy(t *testing.T, l *listenerv3.Listener, name string) *tcpv3.TcpProxy {
	t.Helper()
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		if fc.GetName() != name {
			continue
		}
		for _, f := range fc.GetFilters() {
			p := &tcpv3.TcpProxy{}
			if f.GetTypedConfig().UnmarshalTo(p) == nil {
				return p
			}
		}
	}
	t.Fatalf("listener %s: no TCP proxy in a chain named %s", l.GetName(), name)
	return nil
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
