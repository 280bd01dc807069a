package gen

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestDedupeDomains: a domain goes to the first virtual host that claims
// it, in any case; shared hosts, in lower case or not, lose theirs by a
// rebuild, and the shared host itself stays whole.
func TestDedupeDomains(t *testing.T) {
	share := func(ds ...string) vhostPart {
		vh := func() *routev3.VirtualHost { return &routev3.VirtualHost{Name: ds[0], Domains: slices.Clone(ds)} }
		return vhostPart{shared: encodeHost(vh()), build: vh}
	}
	own := func(ds ...string) vhostPart { return vhostPart{own: &routev3.VirtualHost{Name: ds[0], Domains: ds}} }
	parts := []vhostPart{
		share("a.example", "10.0.0.1"),
		own("A.Example:80", "A.EXAMPLE", "c.example"),
		share("B.example", "10.0.0.2"),
		share("b.EXAMPLE", "d.example", "10.0.0.1"),
		share("e.example", "10.0.0.5"),
		own("f.example", "10.0.0.2", "E.example"),
	}
	third := parts[3].shared
	dedupeDomains(parts)
	want := [][]string{
		{"a.example", "10.0.0.1"},
		{"A.Example:80", "c.example"},
		{"B.example", "10.0.0.2"},
		{"d.example"},
		{"e.example", "10.0.0.5"},
		{"f.example"},
	}
	for i, p := range parts {
		got, _ := p.domains()
		if !slices.Equal(got, want[i]) {
			t.Errorf("host %d: domains %q, want %q", i, got, want[i])
		}
	}
	for _, i := range []int{0, 2, 4} {
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
}
