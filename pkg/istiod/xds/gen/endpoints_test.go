package gen_test

import (
	"slices"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// TestNamedEndpointsMatchAll: a load assignment asked for by name, alone
// (looked up by its cluster's host and port) or among many (picked from
// the scope's map), is the very resource the scope's whole set holds under
// that name, and a name the set lacks finds
// nothing: other scopes' subsets, hosts the scope does not see, DNS
// clusters, other ports, malformed names.
func TestNamedEndpointsMatchAll(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t, otherReviewsRule), "1")
	const reviews = "reviews.default.svc.cluster.local"
	extra := []string{
		"outbound|9080|v1|" + reviews, "outbound|9080|v2|" + reviews, "outbound|9080||" + reviews,
		"outbound|9080|v3|" + reviews, "outbound|9081||" + reviews, "outbound|9080||nowhere.default.svc.cluster.local",
		"outbound|443||api.example.com", "outbound|8080||cart.shop.svc.cluster.local",
		"inbound|9080||", "outbound|x||" + reviews, "outbound|9080|" + reviews, "", "|||",
	}
	cases := append(slices.Clone(proxies[:3]), proxyCase{name: "other", id: "sidecar~10.8.0.9~w.other~other.svc.cluster.local"})
	for _, c := range cases {
		p := proxyFor(t, c)
		all, err := gen.Generate(pc, p, gen.EndpointType, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*gen.Resource{}
		var names []string
		for _, r := range all {
			byName[r.Name] = r
			names = append(names, r.Name)
		}
		for _, name := range append(names, extra...) {
			got, err := gen.Generate(pc, p, gen.EndpointType, []string{name})
			if err != nil {
				t.Fatal(err)
			}
			want := byName[name]
			switch {
			case want == nil && len(got) != 0:
				t.Errorf("%s: %q found %d resources; the whole set has none", c.name, name, len(got))
			case want != nil && (len(got) != 1 || got[0] != want):
				t.Errorf("%s: %q found %v, want the whole set's %p", c.name, name, got, want)
			}
		}
		// Every name at once, backwards and twice: the whole set, in order.
		rev := slices.Clone(names)
		slices.Reverse(rev)
		got, err := gen.Generate(pc, p, gen.EndpointType, append(append(rev, extra...), names...))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, all) {
			t.Errorf("%s: every name at once found %d resources, want the whole set's %d in order", c.name, len(got), len(all))
		}
	}
}
