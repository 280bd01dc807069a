package main

import (
	"strings"
	"testing"
)

// TestByType: the names follow the order of types, and only the types
// received are listed, in KiB per client and change.
func TestByType(t *testing.T) {
	for i, suffix := range []string{".Cluster", ".ClusterLoadAssignment", ".Listener", ".RouteConfiguration", ".NameTable"} {
		if !strings.HasSuffix(types[i], suffix) {
			t.Errorf("types[%d] = %s, named %s", i, types[i], typeNames[i])
		}
	}
	per := 2.0 * 1024 // two clients, one change
	if got, want := byType([5]int64{0, 1024, 0, 4096, 512}, per), "EDS 0.5, RDS 2.0, NDS 0.2"; got != want {
		t.Errorf("byType = %q, want %q", got, want)
	}
	if got := byType([5]int64{}, per); got != "none" {
		t.Errorf("byType of nothing = %q", got)
	}
}
