package gen_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// otherPagePolicy gives namespace other its own rule for productpage
// (consistent hashing, so its default route differs), and namespace third
// a service whose address is productpage's: its virtual host, sorted
// first, claims the address, which productpage's then loses in namespace
// third alone, though third shares it with namespace fourth.
const otherPagePolicy = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: productpage-from-other, namespace: other}
spec:
  host: productpage.default.svc.cluster.local
  exportTo: [.]
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy-page, namespace: other}
spec:
  hosts: [legacy-page.example.com]
  addresses: [10.96.0.12]
  exportTo: [third]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  endpoints: [{address: 10.8.0.50}]
`

// cartSplit routes cart half to productpage, hashed by the rule of
// namespace other there, and mirrors it to legacy-page, which only
// namespace third sees: the scopes read the VirtualService's destinations
// differently, and its virtual host differs with them.
const cartSplit = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: cart-split, namespace: shop}
spec:
  hosts: [cart.shop.svc.cluster.local]
  http:
  - route:
    - {destination: {host: cart}, weight: 50}
    - {destination: {host: productpage.default.svc.cluster.local, port: {number: 9080}}, weight: 50}
    mirror: {host: legacy-page.example.com, port: {number: 9080}}
`

// shortEntry is a ServiceEntry whose host is the short name of service
// ratings in namespace default, on its port: it claims that name first.
const shortEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: short-ratings, namespace: other}
spec:
  hosts: [ratings]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{number: 9080, name: http, protocol: HTTP}]
`

// TestSharedVirtualHostsMatchScratch: route configurations built in one
// push context, whose scopes share the virtual hosts of services without
// a VirtualService, are the ones each scope gets in a push context of its
// own, whichever scope comes first.
func TestSharedVirtualHostsMatchScratch(t *testing.T) {
	in := sampleInputs(t, otherPagePolicy, cartSplit, shortEntry)
	cases := []proxyCase{proxies[0], proxies[2], {name: "other", id: "sidecar~10.8.0.9~w.other~other.svc.cluster.local"},
		{name: "third", id: "sidecar~10.8.0.10~w.third~third.svc.cluster.local"},
		{name: "fourth", id: "sidecar~10.8.0.11~w.fourth~fourth.svc.cluster.local"}}
	routes := func(pc *model.PushContext, c proxyCase) []*gen.Resource {
		rs, err := gen.Generate(pc, proxyFor(t, c), gen.RouteType, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	scratch := map[string][]*gen.Resource{}
	for _, c := range cases {
		scratch[c.name] = routes(model.BuildPushContext(in, "1"), c)
		domainsOnce(t, c.name, scratch[c.name])
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {3, 4, 2, 1, 0}} {
		pc := model.BuildPushContext(in, "1")
		for _, i := range order {
			c := cases[i]
			got, want := routes(pc, c), scratch[c.name]
			if !slices.EqualFunc(got, want, func(a, b *gen.Resource) bool { return a.Name == b.Name && a.Hash == b.Hash }) {
				t.Errorf("order %v: %s's route configurations differ from its own push context's", order, c.name)
			}
		}
	}

	// What the shared hosts must not blur: namespace other's rule, third's
	// claim on the address, and the short names in productpage's namespace.
	host := func(c proxyCase, name string) *routev3.VirtualHost {
		for _, r := range scratch[c.name] {
			var rc routev3.RouteConfiguration
			if err := r.Any.UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			for _, vh := range rc.GetVirtualHosts() {
				if vh.GetName() == name {
					return vh
				}
			}
		}
		t.Fatalf("%s: no virtual host %s", c.name, name)
		return nil
	}
	page := func(c proxyCase) *routev3.VirtualHost { return host(c, "productpage.default.svc.cluster.local:9080") }
	inDefault, inOther, inThird, inFourth := page(cases[0]), page(cases[2]), page(cases[3]), page(cases[4])
	for _, c := range []struct {
		name string
		vh   *routev3.VirtualHost
		want bool
	}{{"default", inDefault, true}, {"third", inThird, false}, {"fourth", inFourth, true}} {
		if got := slices.Contains(c.vh.GetDomains(), "10.96.0.12"); got != c.want {
			t.Errorf("productpage's address in %s's domains %v: %t, want %t", c.name, c.vh.GetDomains(), got, c.want)
		}
	}
	if !slices.Contains(inDefault.GetDomains(), "productpage") || slices.Contains(inOther.GetDomains(), "productpage") {
		t.Errorf("productpage's short name: in default %v, in other %v; want it in default's only", inDefault.GetDomains(), inOther.GetDomains())
	}
	if got := host(cases[0], "ratings.default.svc.cluster.local:9080").GetDomains(); slices.Contains(got, "ratings") {
		t.Errorf("ratings in default keeps its short name %v, which the entry for host ratings claims first", got)
	}
	hashed := func(vh *routev3.VirtualHost) bool { return len(vh.GetRoutes()[0].GetRoute().GetHashPolicy()) > 0 }
	if hashed(inDefault) || !hashed(inOther) {
		t.Errorf("productpage's default route hashed: in default %t, in other %t; want other's only", hashed(inDefault), hashed(inOther))
	}

	// What the shared hosts of cart-split must not blur: other's rule for
	// a destination, and third's view of the mirror.
	cart := func(c proxyCase) *routev3.RouteAction {
		return host(c, "cart.shop.svc.cluster.local:8080").GetRoutes()[0].GetRoute()
	}
	if a, b := cart(cases[2]), cart(cases[4]); len(a.GetHashPolicy()) == 0 || len(b.GetHashPolicy()) > 0 {
		t.Errorf("cart-split hashed: in other %t, in fourth %t; want other's only", len(a.GetHashPolicy()) > 0, len(b.GetHashPolicy()) > 0)
	}
	mirror := func(c proxyCase) string { return cart(c).GetRequestMirrorPolicies()[0].GetCluster() }
	if a, b := mirror(cases[3]), mirror(cases[4]); a != "outbound|9080||legacy-page.example.com" || b != gen.BlackHoleCluster {
		t.Errorf("cart-split mirrors: in third to %s, in fourth to %s; want legacy-page, then %s", a, b, gen.BlackHoleCluster)
	}
}

// TestRouteBytesAreCanonical: route configurations assembled from shared
// and own virtual hosts are the bytes deterministic marshaling of the same
// message gives, so their versions are those of a whole marshal.
func TestRouteBytesAreCanonical(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t, otherPagePolicy, cartSplit), "1")
	cases := append(slices.Clone(proxies[:3]), proxyCase{name: "third", id: "sidecar~10.8.0.10~w.third~third.svc.cluster.local"})
	for _, c := range cases {
		rs, err := gen.Generate(pc, proxyFor(t, c), gen.RouteType, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("%s: no route configurations", c.name)
		}
		for _, r := range rs {
			var rc routev3.RouteConfiguration
			if err := r.Any.UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&rc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Any.Value, want) {
				t.Errorf("%s: route configuration %s: %d bytes assembled, not the %d of its marshal", c.name, r.Name, len(r.Any.Value), len(want))
			}
		}
	}
}

// domainsOnce checks that no route configuration of rs has a domain twice,
// in any case, or a virtual host without one: Envoy rejects either.
func domainsOnce(t *testing.T, name string, rs []*gen.Resource) {
	t.Helper()
	for _, r := range rs {
		var rc routev3.RouteConfiguration
		if err := r.Any.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, vh := range rc.GetVirtualHosts() {
			if len(vh.GetDomains()) == 0 {
				t.Errorf("%s: route configuration %s: virtual host %s has no domains", name, r.Name, vh.GetName())
			}
			for _, d := range vh.GetDomains() {
				if prev, dup := seen[strings.ToLower(d)]; dup {
					t.Errorf("%s: route configuration %s: domain %s in %s and %s", name, r.Name, d, prev, vh.GetName())
				}
				seen[strings.ToLower(d)] = vh.GetName()
			}
		}
	}
}
