package gen

import (
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestDedupeDomains: a domain goes to the first virtual host that claims
// it, in any case; shared hosts, in lower case or not, lose theirs by a
// rebuild, and the shared host itself stays whole. A shared host whose
// domains no other host claims is marked alone.
func TestDedupeDomains(t *testing.T) {
	lists := [][]string{
		{"a.example", "10.0.0.1"},
		{"A.Example:80", "A.EXAMPLE", "c.example"},
		{"B.example", "10.0.0.2"},
		{"b.EXAMPLE", "d.example", "10.0.0.1"},
		{"e.example", "10.0.0.5"},
		{"f.example", "10.0.0.2", "E.example"},
		{"g.example", "10.0.0.7"},
	}
	c := newClaims(0)
	for _, ds := range lists {
		c.add(slices.Values(ds))
	}
	share := func(ds []string) vhostPart {
		vh := func() *routev3.VirtualHost { return &routev3.VirtualHost{Name: ds[0], Domains: slices.Clone(ds)} }
		return vhostPart{shared: encodeHost(vh(), c.alone(slices.Values(ds))), build: vh}
	}
	own := func(ds []string) vhostPart {
		return vhostPart{own: &routev3.VirtualHost{Name: ds[0], Domains: slices.Clone(ds)}}
	}
	parts := []vhostPart{share(lists[0]), own(lists[1]), share(lists[2]), share(lists[3]), share(lists[4]), own(lists[5]), share(lists[6])}
	third := parts[3].shared
	dedupeDomains(parts)
	want := [][]string{
		{"a.example", "10.0.0.1"},
		{"A.Example:80", "c.example"},
		{"B.example", "10.0.0.2"},
		{"d.example"},
		{"e.example", "10.0.0.5"},
		{"f.example"},
		{"g.example", "10.0.0.7"},
	}
	for i, p := range parts {
		got, _ := p.domains()
		if !slices.Equal(got, want[i]) {
			t.Errorf("host %d: domains %q, want %q", i, got, want[i])
		}
	}
	for _, i := range []int{0, 2, 4, 6} {
		if parts[i].shared == nil {
			t.Errorf("host %d lost nothing but is no longer shared", i)
		}
	}
	if parts[3].shared != nil || !slices.Equal(third.domains, []string{"b.EXAMPLE", "d.example", "10.0.0.1"}) {
		t.Errorf("host 3: shared %t after losing domains; its shared host's domains %q", parts[3].shared != nil, third.domains)
	}
	if !parts[0].shared.folded || parts[2].shared.folded {
		t.Errorf("folded: %t for a lower-case host, %t for a mixed-case one", parts[0].shared.folded, parts[2].shared.folded)
	}
	for _, i := range []int{0, 2, 4, 6} {
		if got := parts[i].shared.alone; got != (i == 6) {
			t.Errorf("host %d alone: %t, want %t", i, got, i == 6)
		}
	}
}

// TestClaimsCoverCollisions: wherever two services' virtual hosts share a
// domain, in any case, or one holds a domain twice, neither is alone; and
// a service clear of all others is.
func TestClaimsCoverCollisions(t *testing.T) {
	kube := func(name, ns string, addrs ...string) *model.Service {
		return &model.Service{Hostname: name + "." + ns + ".svc.cluster.local", Name: name, Namespace: ns, Registry: model.RegistryKubernetes, Addresses: addrs}
	}
	entry := func(host string, addrs ...string) *model.Service {
		return &model.Service{Hostname: host, Name: host, Namespace: "x", Registry: model.RegistryExternal, Addresses: addrs}
	}
	svcs := []*model.Service{
		kube("a", "x", "10.0.0.1"),
		entry("a.x"),                    // a's short name
		entry("A.X.SVC"),                // a's other short name, in upper case
		entry("a", "10.0.0.9"),          // a's bare name, in its own namespace only
		entry("a.x.svc.cluster.local."), // a's host name, absolute
		kube("b", "y", "fd00::1"),       // b's IPv6 address ...
		entry("c.example", "FD00::1"),   // ... is c's, in upper case
		kube("d", "y", "10.0.0.4", "10.0.0.4"),
		entry("e.example", "10.0.0.1"), // a's address
		kube("h", "y"),                 // headless ...
		entry("*.h.y.svc"),             // ... so its pods' names are under h.y.svc, as here
		kube("z", "z", "10.0.0.26"),
	}
	c := newClaims(0)
	for _, svc := range svcs {
		c.add(hostNames(svc, svc.Namespace))
	}
	lower := func(ds []string) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = strings.ToLower(d)
		}
		return out
	}
	collided := 0
	for _, ns := range []string{"x", "y", "z", "other"} {
		for i, s := range svcs {
			ds := lower(domains(s, ns))
			clash := len(slices.Compact(slices.Sorted(slices.Values(ds)))) < len(ds)
			for j, o := range svcs {
				if i != j && slices.ContainsFunc(lower(domains(o, ns)), func(d string) bool { return slices.Contains(ds, d) }) {
					clash = true
				}
			}
			if clash {
				collided++
				if c.alone(hostNames(s, ns)) {
					t.Errorf("%s seen from %s: a domain clashes, yet it is alone", s.Hostname, ns)
				}
			}
		}
	}
	if collided == 0 || !c.alone(hostNames(svcs[len(svcs)-1], "z")) {
		t.Errorf("%d clashes; z alone: %t", collided, c.alone(hostNames(svcs[len(svcs)-1], "z")))
	}
}

// TestDomains pins a sidecar's domains for a service, as Istio 1.31 writes
// them (test/interop TestRouteDomainsAsIstio compares them with Istio's
// own): no ports, the absolute host name, the bare name only in the
// service's namespace, IPv6 VIPs in brackets, and a headless service's
// names again under "*.".
func TestDomains(t *testing.T) {
	svc := func(name, ns string, addrs ...string) *model.Service {
		return &model.Service{Hostname: name + "." + ns + ".svc.cluster.local", Name: name, Namespace: ns, Registry: model.RegistryKubernetes, Addresses: addrs}
	}
	for _, c := range []struct {
		svc     *model.Service
		proxyNS string
		want    []string
	}{
		{svc("r", "a", "10.0.0.1"), "a", []string{"r.a.svc.cluster.local", "r.a.svc.cluster.local.", "r.a", "r.a.svc", "r", "10.0.0.1"}},
		{svc("r", "a", "10.0.0.1", "fd00::1"), "b", []string{"r.a.svc.cluster.local", "r.a.svc.cluster.local.", "r.a", "r.a.svc", "10.0.0.1", "[fd00::1]"}},
		{svc("h", "a"), "b", []string{"h.a.svc.cluster.local", "h.a.svc.cluster.local.", "h.a", "h.a.svc",
			"*.h.a.svc.cluster.local", "*.h.a.svc.cluster.local.", "*.h.a", "*.h.a.svc"}},
		{&model.Service{Hostname: "api.example.com", Registry: model.RegistryExternal, Addresses: []string{"240.0.0.1"}}, "b",
			[]string{"api.example.com", "api.example.com.", "240.0.0.1"}},
		{&model.Service{Hostname: "10.1.2.3", Registry: model.RegistryExternal}, "b", []string{"10.1.2.3"}},
	} {
		if got := domains(c.svc, c.proxyNS); !slices.Equal(got, c.want) {
			t.Errorf("%s seen from %s: %q, want %q", c.svc.Hostname, c.proxyNS, got, c.want)
		}
	}
}
