package gen_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// policyClusterRefs returns the clusters routes and listeners name that
// xdstest.Check does not follow: mirror policies and weighted TCP proxies.
func policyClusterRefs(t *testing.T, cfg xdstest.Config) []string {
	t.Helper()
	var out []string
	for _, a := range cfg[gen.RouteType] {
		var rc routev3.RouteConfiguration
		if err := a.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				for _, m := range r.GetRoute().GetRequestMirrorPolicies() {
					out = append(out, m.GetCluster())
				}
			}
		}
	}
	for _, a := range cfg[gen.ListenerType] {
		var l listenerv3.Listener
		if err := a.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				var tp tcpv3.TcpProxy
				if f.GetTypedConfig().MessageIs(&tp) {
					if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
						t.Fatal(err)
					}
					for _, w := range tp.GetWeightedClusters().GetClusters() {
						out = append(out, w.GetName())
					}
				}
			}
		}
	}
	return out
}

// TestPolicyClusterRefs checks mirror and weighted TCP destinations exist.
func TestPolicyClusterRefs(t *testing.T) {
	pc := policyMesh(t)
	for _, c := range policyProxies {
		cfg := generateAll(t, pc, c)
		clusters := map[string]bool{}
		for _, a := range cfg[gen.ClusterType] {
			m, err := xdstest.Validate(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			clusters[xdstest.Name(m)] = true
		}
		refs := policyClusterRefs(t, cfg)
		if c.name == "policy-sidecar" && len(refs) < 4 {
			t.Errorf("%s: %d mirror and weighted TCP references, want the mesh's (>= 4)", c.name, len(refs))
		}
		for _, r := range refs {
			if !clusters[r] {
				t.Errorf("%s: cluster %q is referenced but not generated", c.name, r)
			}
		}
	}
}
