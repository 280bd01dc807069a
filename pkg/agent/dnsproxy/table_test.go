package dnsproxy

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

func TestAltHosts(t *testing.T) {
	o := tableOptions{namespace: "default", svcDomain: "svc.cluster.local"}
	for _, tc := range []struct {
		host string
		ni   *nds.NameTable_NameInfo
		want []string
	}{
		{"reviews.default.svc.cluster.local.", &nds.NameTable_NameInfo{Registry: "Kubernetes", Shortname: "reviews", Namespace: "default"},
			[]string{"reviews.default.", "reviews.", "reviews.default.svc.", "reviews.default.svc.cluster."}},
		{"ratings.other.svc.cluster.local.", &nds.NameTable_NameInfo{Registry: "Kubernetes", Shortname: "ratings", Namespace: "other"},
			[]string{"ratings.other.", "ratings.other.svc.", "ratings.other.svc.cluster."}},
		// Another cluster's domain: no short names (they would clash).
		{"reviews.default.svc.remote.local.", &nds.NameTable_NameInfo{Registry: "Kubernetes", Shortname: "reviews", Namespace: "default"}, nil},
		{"api.example.com.", &nds.NameTable_NameInfo{Registry: "External", AltHosts: []string{"API.example.net"}}, []string{"api.example.net."}},
	} {
		if diff := cmp.Diff(tc.want, altHosts(tc.host, tc.ni, o)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.host, diff)
		}
	}
}

func TestTableConflictsAndBadEntries(t *testing.T) {
	nt := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{
		// "reviews.default." is an alt name of the service, but also a host
		// of its own: the host's own name wins.
		"reviews.default.svc.cluster.local": {Ips: []string{"10.0.0.1"}, Registry: "Kubernetes", Shortname: "reviews", Namespace: "default"},
		"reviews.default":                   {Ips: []string{"10.9.9.9"}},
		"bad-ip.example.com":                {Ips: []string{"not-an-ip", "10.0.0.7"}},
		"bad..name":                         {Ips: []string{"10.0.0.8"}},
	}}
	tb := buildTable(nt, tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch}, slog.New(slog.DiscardHandler))
	lookup := func(name string, qtype uint16) []string {
		key, err := nameKey(name, qtype)
		if err != nil {
			t.Fatal(err)
		}
		a, target := tb.lookup([]byte(key))
		if a == nil {
			return nil
		}
		got := addrsOf(answerMsg(t, a, 0, key, target))
		slices.Sort(got)
		return got
	}
	for name, want := range map[string][]string{
		"reviews.default.":    {"10.9.9.9"},
		"reviews.":            {"10.0.0.1"},
		"bad-ip.example.com.": {"10.0.0.7"},
		"reviews.default.default.svc.cluster.local.": {"10.9.9.9"},
	} {
		if diff := cmp.Diff(want, lookup(name, dns.TypeA)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if tb.hosts != 3 {
		t.Errorf("%d hosts, want 3 (the invalid name skipped)", tb.hosts)
	}
}

// TestAliasLookup: a name is an alias only when the first search domain
// is its whole last labels, and its target is a host's name.
func TestAliasLookup(t *testing.T) {
	tb := buildTable(testTable(), tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch}, slog.New(slog.DiscardHandler))
	key := func(name string, qtype uint16) []byte {
		k, err := nameKey(name, qtype)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(k)
	}
	search := string(tb.search0Wire)
	for _, tc := range []struct {
		name   string
		key    []byte
		target string // "" for no alias
	}{
		{"alias of a short name", key("reviews.default.default.svc.cluster.local.", dns.TypeA), "\x07reviews\x07default"},
		{"alias of an fqdn, AAAA", key("reviews.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeAAAA), "\x07reviews\x07default\x03svc\x07cluster\x05local"},
		{"not a host", key("nothing.default.svc.cluster.local.", dns.TypeA), ""},
		{"SRV is not aliased", key("reviews.default.default.svc.cluster.local.", dns.TypeSRV), ""},
		// The search domain's bytes end the name, but inside a label.
		{"not on a label boundary", append([]byte("\x09x"+search[:len(search)-1]), 0, 0, 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, target := tb.lookup(tc.key)
			if string(target) != tc.target || (tc.target != "") != (a != nil) {
				t.Errorf("lookup: answer %v, target %q; want target %q", a != nil, target, tc.target)
			}
		})
	}
}
