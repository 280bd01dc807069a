package cli

import "testing"

func TestClusterDomain(t *testing.T) {
	for in, want := range map[string]string{
		"default.svc.cluster.local":  "cluster.local",
		"shop.svc.corp.example.":     "corp.example",
		"":                           "",
		"cluster.local":              "",
		"default.svc.":               "",
		"$(POD_NAMESPACE).svc.a.b.c": "a.b.c",
	} {
		if got := ClusterDomain(in); got != want {
			t.Errorf("ClusterDomain(%q) = %q, want %q", in, got, want)
		}
	}
}
