package interop

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"          // to print Istio's retry predicates
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3" // and priorities
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// TestRoutesAsIstio: a sidecar's outbound virtual hosts are Istio 1.31's,
// field for field, as its own pilot-discovery writes them on the same API
// server and mesh config: a service's default route, hashed by its
// DestinationRule; a VirtualService's routes, retried in each way the API
// allows, not retried, split, hashed, redirected, matched on every part
// of a request, and by default, kept or dropped by their matches on the
// sidecar's labels, namespace and gateway; a service whose every route is
// for other sidecars; and the catch-all. Once with the mesh config of Istio's chart, once with a mesh
// default retry policy and the attempt count header turned off.
func TestRoutesAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	for _, tc := range []struct {
		name string
		mesh map[string]any // set over the chart's mesh config
	}{
		{name: "chart"},
		{name: "mesh-retries", mesh: map[string]any{
			"defaultHttpRetryPolicy": map[string]any{"attempts": 4, "retryOn": "reset,503", "perTryTimeout": "3s"},
			"defaultConfig":          map[string]any{"proxyHeaders": map[string]any{"attemptCount": map[string]any{"disabled": true}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, ctx := crdtest.Start(t)
			ns := netnstest.UniqueName("rr-")
			withReviews(t, ctx, env, "10.0.0.62", ns)
			withService(t, ctx, env, ns, "details", "10.0.0.63")
			withService(t, ctx, env, ns, "ratings", "10.0.0.64")
			for _, o := range retryConfig(ns) {
				createIstio(t, ctx, env, o.resource, o.obj)
			}
			istio, skiff := bothControlPlanesMesh(t, env, istiod, meshWith(t, tc.mesh))
			reviews, det, rat := "reviews."+ns+".svc.cluster.local:9080", "details."+ns+".svc.cluster.local:9080", "ratings."+ns+".svc.cluster.local:9080"
			want := routeConfig(t, ctx, istio, ns, "9080", reviews, "rest") // once the VirtualService is in
			got := routeConfig(t, ctx, skiff, ns, "9080", reviews, "rest")
			for _, vh := range []string{reviews, det, rat, "allow_any"} {
				w, g := sortedDomains(virtualHost(want, vh)), sortedDomains(virtualHost(got, vh))
				if d := cmp.Diff(w, g, protocmp.Transform()); d != "" {
					t.Errorf("virtual host %s differs from Istio's (-Istio +Skiff):\n%s", vh, d)
				}
			}
		})
	}
}

// retryConfig is the configuration TestRoutesAsIstio routes by in
// namespace ns.
func retryConfig(ns string) []struct {
	resource string
	obj      map[string]any
} {
	meta := func(kind, name string) (string, string, map[string]any) {
		return "networking.istio.io/v1", kind, map[string]any{"name": name, "namespace": ns}
	}
	object := func(kind, name string, spec map[string]any) map[string]any {
		api, k, m := meta(kind, name)
		return map[string]any{"apiVersion": api, "kind": k, "metadata": m, "spec": spec}
	}
	dest := func(subset string) map[string]any {
		d := map[string]any{"host": "reviews"}
		if subset != "" {
			d["subset"] = subset
		}
		return map[string]any{"destination": d}
	}
	weighted := func(subset string, w int) map[string]any {
		d := dest(subset)
		d["weight"] = w
		return d
	}
	prefix := func(p string) []any { return []any{map[string]any{"uri": map[string]any{"prefix": p}}} }
	return []struct {
		resource string
		obj      map[string]any
	}{
		{"destinationrules", object("DestinationRule", "reviews", map[string]any{"host": "reviews", "subsets": []any{
			map[string]any{"name": "v1", "labels": map[string]any{"version": "v1"}},
			map[string]any{"name": "v2", "labels": map[string]any{"version": "v2"}, "trafficPolicy": map[string]any{
				"loadBalancer": map[string]any{"consistentHash": map[string]any{"httpHeaderName": "x-user"}}}},
		}})},
		{"destinationrules", object("DestinationRule", "details", map[string]any{"host": "details", "trafficPolicy": map[string]any{
			"loadBalancer": map[string]any{"consistentHash": map[string]any{"httpCookie": map[string]any{"name": "u", "ttl": "60s"}}}}})},
		// No route of ratings' is for the test's sidecar (app: client): it
		// gets the default route.
		{"virtualservices", object("VirtualService", "ratings", map[string]any{"hosts": []any{"ratings"}, "http": []any{
			map[string]any{"name": "others", "match": []any{map[string]any{"sourceLabels": map[string]any{"app": "other"}}},
				"route": []any{map[string]any{"destination": map[string]any{"host": "ratings"}}}},
		}})},
		{"virtualservices", object("VirtualService", "reviews", map[string]any{"hosts": []any{"reviews"}, "gateways": []any{"mesh", "edge"}, "http": []any{
			map[string]any{"name": "from-other", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/o"}, "sourceLabels": map[string]any{"app": "other"}}}, "route": []any{dest("")}},
			map[string]any{"name": "from-client", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/c"}, "sourceLabels": map[string]any{"app": "client"}, "sourceNamespace": ns}}, "route": []any{dest("")}},
			map[string]any{"name": "elsewhere", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/e"}, "sourceNamespace": "elsewhere"}}, "route": []any{dest("")}},
			map[string]any{"name": "edge-only", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/g"}, "gateways": []any{"edge"}}}, "route": []any{dest("")}},
			map[string]any{"name": "mesh-decides", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/md"}, "gateways": []any{"mesh"}, "sourceLabels": map[string]any{"app": "other"}}}, "route": []any{dest("")}},
			map[string]any{"name": "retried", "match": prefix("/retried"), "timeout": "5s", "route": []any{dest("v1")},
				"retries": map[string]any{"attempts": 3, "retryOn": "gateway-error,503, 429,reset", "perTryTimeout": "2s",
					"retryRemoteLocalities": true, "backoff": "100ms"}},
			map[string]any{"name": "codes-only", "match": prefix("/codes"), "route": []any{dest("")},
				"retries": map[string]any{"attempts": 1, "retryOn": "502,504"}},
			map[string]any{"name": "off", "match": []any{map[string]any{"uri": map[string]any{"exact": "/off"}}}, "route": []any{dest("")},
				"retries": map[string]any{"attempts": 0}},
			map[string]any{"name": "split", "match": []any{map[string]any{"uri": map[string]any{"regex": "/split/.*"}}},
				"route":   []any{weighted("v1", 3), weighted("v2", 1)}, // relative weights
				"retries": map[string]any{"attempts": 2, "retryIgnorePreviousHosts": false}},
			map[string]any{"name": "hashed", "match": prefix("/hashed"), "route": []any{dest("v2")}},
			map[string]any{"name": "hashed-kept", "match": prefix("/kept"), "route": []any{dest("v2")},
				"retries": map[string]any{"attempts": 2, "retryIgnorePreviousHosts": true}},
			map[string]any{"name": "moved", "match": prefix("/old"), "redirect": map[string]any{"uri": "/new"}},
			map[string]any{"name": "matched", "route": []any{dest("")}, "match": []any{map[string]any{
				"uri": map[string]any{"prefix": "/m"}, "ignoreUriCase": true,
				"headers":        map[string]any{"x-b": map[string]any{"exact": "b"}, "x-a": map[string]any{"regex": "*"}},
				"withoutHeaders": map[string]any{"x-c": map[string]any{"prefix": "c"}, "x-d": map[string]any{"regex": "*"}},
				"method":         map[string]any{"exact": "GET"}, "authority": map[string]any{"prefix": "reviews"},
				"scheme": map[string]any{"exact": "http"}, "queryParams": map[string]any{"q": map[string]any{"exact": "1"}},
			}}},
			map[string]any{"name": "rest", "route": []any{dest("")}},
		}})},
	}
}

// meshWith writes the mesh config of Istio's chart with the fields of
// over set (defaultConfig's merged into the chart's), and returns its path.
func meshWith(t *testing.T, over map[string]any) string {
	t.Helper()
	chart := istioInjectFiles(t).mesh
	if over == nil {
		return chart
	}
	raw, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range over {
		if dc, ok := m[k].(map[string]any); ok && k == "defaultConfig" {
			for dk, dv := range v.(map[string]any) {
				dc[dk] = dv
			}
			continue
		}
		m[k] = v
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mesh")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sortedDomains is a copy of vh with its domains sorted (their order
// carries no meaning); nil when vh is.
func sortedDomains(vh *routev3.VirtualHost) *routev3.VirtualHost {
	if vh == nil {
		return nil
	}
	c := proto.Clone(vh).(*routev3.VirtualHost)
	slices.Sort(c.Domains)
	return c
}
