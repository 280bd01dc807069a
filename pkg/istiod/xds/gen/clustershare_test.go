package gen_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// shopRatingsRule gives the proxies of namespace shop their own rule for
// ratings: round robin, where default's rule says LEAST_REQUEST.
const shopRatingsRule = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings-from-shop, namespace: shop}
spec:
  host: ratings.default.svc.cluster.local
  trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
`

// TestScopesShareServiceClusters: two scopes that see a service under the
// same DestinationRule (here none) share its clusters, the very
// resources; a scope that sees it under a rule of its own gets clusters
// built with that rule.
func TestScopesShareServiceClusters(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t, shopRatingsRule), "1")
	clusters := func(c proxyCase) map[string]*gen.Resource {
		rs, err := gen.Generate(pc, proxyFor(t, c), gen.ClusterType, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*gen.Resource{}
		for _, r := range rs {
			m[r.Name] = r
		}
		return m
	}
	page, shop := clusters(proxies[0]), clusters(proxies[2]) // namespaces default and shop
	const cart, ratings = "outbound|8080||cart.shop.svc.cluster.local", "outbound|9080||ratings.default.svc.cluster.local"
	if page[cart] == nil || page[cart] != shop[cart] {
		t.Errorf("%s: productpage's %p and shop's %p, want one shared resource", cart, page[cart], shop[cart])
	}
	lb := func(r *gen.Resource) clusterv3.Cluster_LbPolicy {
		var c clusterv3.Cluster
		if err := r.Any.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		return c.GetLbPolicy()
	}
	if page[ratings] == nil || shop[ratings] == nil {
		t.Fatalf("%s missing: productpage %v, shop %v", ratings, page[ratings] != nil, shop[ratings] != nil)
	}
	if got := lb(page[ratings]); got != clusterv3.Cluster_LEAST_REQUEST {
		t.Errorf("productpage's %s balances %v, want default's rule (LEAST_REQUEST)", ratings, got)
	}
	if got := lb(shop[ratings]); got != clusterv3.Cluster_ROUND_ROBIN {
		t.Errorf("shop's %s balances %v, want shop's rule (ROUND_ROBIN)", ratings, got)
	}
}
