package gen_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// TestSidecarScope checks the Sidecar in namespace shop limits what its
// proxies get, for every type, NameTable included.
func TestSidecarScope(t *testing.T) {
	pc := sampleMesh(t)
	names := func(c proxyCase, typ string) []string {
		rs, err := gen.Generate(pc, proxyFor(t, c), typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			m, err := xdstest.Validate(r.Any, nil)
			if err != nil {
				t.Fatal(err)
			}
			if nt, ok := m.(*nds.NameTable); ok {
				for h := range nt.GetTable() {
					out = append(out, h)
				}
				continue
			}
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	shop, page := proxies[2], proxies[0]
	clusters := names(shop, gen.ClusterType)
	for _, c := range clusters {
		if strings.Contains(c, "reviews") || strings.Contains(c, "example.com") {
			t.Errorf("shop proxy got cluster %s outside its Sidecar's egress hosts", c)
		}
	}
	if !slices.Contains(clusters, "outbound|9080||ratings.default.svc.cluster.local") || !slices.Contains(clusters, "outbound|8080||cart.shop.svc.cluster.local") {
		t.Errorf("shop proxy clusters %v lack ratings or cart", clusters)
	}
	if got, want := names(shop, gen.NameTableType), []string{"cart.shop.svc.cluster.local", "ratings.default.svc.cluster.local"}; !slices.Equal(got, want) {
		t.Errorf("shop NameTable %v, want %v", got, want)
	}
	if got := names(page, gen.NameTableType); len(got) != 6 {
		t.Errorf("productpage NameTable %v, want the 6 hosts with addresses", got)
	}
	if got := names(shop, gen.RouteType); !slices.Equal(got, []string{"8080", "9080"}) {
		t.Errorf("shop routes %v", got)
	}
}
