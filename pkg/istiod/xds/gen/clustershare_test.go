package gen_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
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
	page, shop := byName(t, pc, proxies[0], gen.ClusterType), byName(t, pc, proxies[2], gen.ClusterType) // namespaces default and shop
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

// TestScopesShareNameTable: the scopes of two namespaces that see the same
// services share one name table, the very resource; the shop proxy, whose
// Sidecar narrows what it sees, gets its own.
func TestScopesShareNameTable(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t), "1")
	table := func(c proxyCase) *gen.Resource {
		rs, err := gen.Generate(pc, proxyFor(t, c), gen.NameTableType, nil)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %v, %d resources", c.id, err, len(rs))
		}
		return rs[0]
	}
	other := proxyCase{id: "sidecar~10.8.0.9~w.other~other.svc.cluster.local"}
	page, elsewhere, shop := table(proxies[0]), table(other), table(proxies[2])
	if page != elsewhere {
		t.Errorf("productpage (default) and a proxy of namespace other see the same services: tables %p and %p, want one", page, elsewhere)
	}
	if shop == page || shop.Hash == page.Hash {
		t.Error("the shop proxy, under a Sidecar, got productpage's name table")
	}
}

// TestSharedNameTableFollowsHeadlessEndpoints: after an endpoint-only
// change of a headless service, the proxy whose scope shares another's
// name table gets the new addresses, as a build from scratch does.
func TestSharedNameTableFollowsHeadlessEndpoints(t *testing.T) {
	in := sampleInputs(t, xdstest.HeadlessDB, xdstest.DBSlice("127.0.0.61"))
	next := xdstest.With(t, in, xdstest.DBSlice("127.0.0.62"))
	other := proxyFor(t, proxyCase{id: "sidecar~10.8.0.9~w.other~other.svc.cluster.local"})
	table := func(pc *model.PushContext, p *model.Proxy) *gen.Resource {
		rs, err := gen.Generate(pc, p, gen.NameTableType, nil)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%v, %d resources", err, len(rs))
		}
		return rs[0]
	}
	prev := model.BuildPushContext(in, "1")
	table(prev, proxyFor(t, proxies[0])) // productpage's scope is built first: the peer
	before := table(prev, other)
	pc := model.Rebuild(prev, next, "2")
	pc.Inherit(prev, pc.Diff(prev))
	after, scratch := table(pc, other), table(model.BuildPushContext(next, "2"), other)
	if after.Hash != scratch.Hash || after.Hash == before.Hash {
		t.Errorf("after the change: %x; from scratch %x; before %x", after.Hash, scratch.Hash, before.Hash)
	}
}

// otherReviewsRule gives the proxies of namespace other their own rule for
// reviews, with subset v2 alone.
const otherReviewsRule = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews-from-other, namespace: other}
spec:
  host: reviews.default.svc.cluster.local
  subsets: [{name: v2, labels: {version: v2}}]
`

// TestScopesShareLoadAssignments: scopes share a service port's load
// assignments, the very resources, but each gets the subsets of the
// DestinationRule it sees the service under.
func TestScopesShareLoadAssignments(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t, otherReviewsRule), "1")
	page := byName(t, pc, proxies[0], gen.EndpointType) // namespace default, under default's rule (v1, v2)
	other := byName(t, pc, proxyCase{id: "sidecar~10.8.0.9~w.other~other.svc.cluster.local"}, gen.EndpointType)
	const all, v1, v2 = "outbound|9080||reviews.default.svc.cluster.local", "outbound|9080|v1|reviews.default.svc.cluster.local", "outbound|9080|v2|reviews.default.svc.cluster.local"
	for _, name := range []string{all, v2} {
		if page[name] == nil || page[name] != other[name] {
			t.Errorf("%s: productpage's %p and other's %p, want one shared resource", name, page[name], other[name])
		}
	}
	if page[v1] == nil {
		t.Errorf("productpage lacks %s: default's rule has subset v1", v1)
	}
	if other[v1] != nil {
		t.Errorf("namespace other has %s: its own rule has no subset v1", v1)
	}
}

// byName generates c's resources of typeURL in pc, by name.
func byName(t *testing.T, pc *model.PushContext, c proxyCase, typeURL string) map[string]*gen.Resource {
	t.Helper()
	rs, err := gen.Generate(pc, proxyFor(t, c), typeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]*gen.Resource, len(rs))
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}
