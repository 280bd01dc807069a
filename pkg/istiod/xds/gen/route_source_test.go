package gen_test

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// TestRoutesBySource: in one namespace, a sidecar whose labels a route's
// source labels name gets the route, the others do not; sidecars that the
// same matches hold for share what was built, those that differ do not.
// For TCP too: the writer's connections to db go to its primary subset.
func TestRoutesBySource(t *testing.T) {
	r := file.New(filepath.Join("testdata", "source"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatal(p)
	}
	pc := model.BuildPushContext(r.Inputs(), "v1")
	sidecar := func(ip string, labels map[string]any) *model.Proxy {
		return proxyFor(t, proxyCase{id: "sidecar~" + ip + "~app-0.src~src.svc.cluster.local", meta: map[string]any{"LABELS": labels}})
	}
	canary := sidecar("127.0.7.1", map[string]any{"app": "web", "track": "canary"})
	stable := sidecar("127.0.7.2", map[string]any{"app": "web", "track": "stable"})
	other := sidecar("127.0.7.3", map[string]any{"app": "reader"})
	writer := sidecar("127.0.7.4", map[string]any{"app": "writer"})

	routes := func(p *model.Proxy) ([]*gen.Resource, []string) {
		rs, err := gen.Generate(pc, p, gen.RouteType, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, res := range rs {
			var rc routev3.RouteConfiguration
			if err := res.Any.UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			for _, vh := range rc.GetVirtualHosts() {
				if strings.HasPrefix(vh.GetName(), "reviews.") {
					for _, r := range vh.GetRoutes() {
						names = append(names, r.GetName())
					}
				}
			}
		}
		return rs, names
	}
	rc, canaryRoutes := routes(canary)
	rs, stableRoutes := routes(stable)
	ro, otherRoutes := routes(other)
	if !slices.Equal(canaryRoutes, []string{"for-canary", "rest"}) || !slices.Equal(stableRoutes, []string{"rest"}) {
		t.Fatalf("reviews routes: canary %q, stable %q; want [for-canary rest] and [rest]", canaryRoutes, stableRoutes)
	}
	if !slices.Equal(otherRoutes, stableRoutes) || rs[0] != ro[0] {
		t.Errorf("stable and reader sidecars (no match on either's labels) do not share route configuration 9080")
	}
	if rc[0] == rs[0] {
		t.Errorf("canary and stable sidecars share route configuration 9080")
	}

	dbCluster := func(p *model.Proxy) string {
		ls, err := gen.Generate(pc, p, gen.ListenerType, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range ls {
			var l listenerv3.Listener
			if err := res.Any.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			if l.GetName() != "10.0.7.2_3306" {
				continue
			}
			var tp tcpv3.TcpProxy
			if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
				t.Fatal(err)
			}
			return tp.GetCluster()
		}
		t.Fatal("no listener 10.0.7.2_3306")
		return ""
	}
	if got, want := dbCluster(writer), "outbound|3306|primary|db.src.svc.cluster.local"; got != want {
		t.Errorf("writer's db connections go to %s, want %s", got, want)
	}
	if got, want := dbCluster(other), "outbound|3306||db.src.svc.cluster.local"; got != want {
		t.Errorf("reader's db connections go to %s, want %s", got, want)
	}
}
