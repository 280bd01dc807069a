package interop

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3" // to compare Istio's
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// TestClustersAsIstio: a sidecar's outbound clusters are Istio 1.31's,
// field for field, as its own pilot-discovery writes them on the same API
// server: a service without a DestinationRule, and one whose rule sets a
// connection pool, outlier detection, a load balancer and a subset that
// hashes. Left out of the comparison: the cluster's filters and metadata,
// which feed the telemetry extensions of Istio's own Envoy build
// (istio.metadata_exchange), which Skiff does not configure.
func TestClustersAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := crdtest.Start(t)
	ns := netnstest.UniqueName("cl-")
	withReviews(t, ctx, env, "10.0.0.66", ns)
	withService(t, ctx, env, ns, "details", "10.0.0.67")
	createIstio(t, ctx, env, "destinationrules", map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
		"metadata": map[string]any{"name": "details", "namespace": ns},
		"spec": map[string]any{"host": "details",
			"trafficPolicy": map[string]any{
				"connectionPool": map[string]any{
					"tcp":  map[string]any{"maxConnections": 10, "connectTimeout": "3s"},
					"http": map[string]any{"http1MaxPendingRequests": 5, "maxRetries": 3, "idleTimeout": "30s"}},
				"outlierDetection": map[string]any{"consecutive5xxErrors": 3, "interval": "5s", "baseEjectionTime": "30s",
					"maxEjectionPercent": 50, "minHealthPercent": 20},
				"loadBalancer": map[string]any{"simple": "ROUND_ROBIN"},
			},
			"subsets": []any{map[string]any{"name": "v1", "labels": map[string]any{"version": "v1"},
				"trafficPolicy": map[string]any{"loadBalancer": map[string]any{"consistentHash": map[string]any{"httpHeaderName": "x-user"}}}}},
		},
	})
	istio, skiff := bothControlPlanes(t, env, istiod)
	for _, name := range []string{
		"outbound|9080||reviews." + ns + ".svc.cluster.local",
		"outbound|9080||details." + ns + ".svc.cluster.local",
		"outbound|9080|v1|details." + ns + ".svc.cluster.local",
	} {
		want := withoutTelemetry(sidecarResource[clusterv3.Cluster](t, ctx, istio, ns, name, nil))
		got := withoutTelemetry(sidecarResource[clusterv3.Cluster](t, ctx, skiff, ns, name, nil))
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Errorf("cluster %s differs from Istio's (-Istio +Skiff):\n%s", name, d)
		}
	}
}

// withoutTelemetry is a copy of c without what feeds Istio's telemetry
// extensions (its filters and metadata).
func withoutTelemetry(c *clusterv3.Cluster) *clusterv3.Cluster {
	c = proto.Clone(c).(*clusterv3.Cluster)
	c.Filters, c.Metadata = nil, nil
	return c
}
