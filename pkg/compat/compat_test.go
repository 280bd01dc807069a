package compat_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/compat"
)

var update = flag.Bool("update", false, "rewrite docs/compatibility.md")

// TestGoldenDoc keeps docs/compatibility.md the rendering of the table.
func TestGoldenDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "compatibility.md")
	got := compat.Markdown()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the table's rendering: run go test ./pkg/compat -run Golden -update", path)
	}
}

// TestTable: one row per binary and name, sorted, every row explained.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	var prev compat.Entry
	for i, e := range compat.Entries() {
		key := string(e.Binary) + " " + e.Name
		if seen[key] {
			t.Errorf("%s: listed twice", key)
		}
		seen[key] = true
		if !slices.Contains(compat.Binaries, e.Binary) {
			t.Errorf("%s: unknown binary", key)
		}
		if e.Note == "" || !strings.HasSuffix(e.Note, ".") {
			t.Errorf("%s: the note must be a sentence", key)
		}
		if e.Example != "" && !e.IsFlag() {
			t.Errorf("%s: only flags have examples", key)
		}
		if i > 0 && prev.Binary == e.Binary && prev.IsFlag() == e.IsFlag() && prev.Name > e.Name {
			t.Errorf("%s: not sorted (after %s)", key, prev.Name)
		}
		prev = e
	}
}

func TestNotApplied(t *testing.T) {
	env := []string{"PLATFORM=gcp", "POD_NAME=istiod-0", "PILOT_TRACE_SAMPLING=", "CLUSTER_ID=c1", "UNRELATED=x", "PLATFORM=gcp",
		"PILOT_ENABLE_AMBIENT=true", "PILOT_PUSH_THROTTLE=50"}
	got := compat.NotApplied(compat.PilotDiscovery, env)
	if want := []string{"CLUSTER_ID", "PILOT_ENABLE_AMBIENT", "PLATFORM"}; !slices.Equal(got, want) {
		t.Fatalf("NotApplied = %v, want %v (applied, empty and unknown variables left out; unread ones in)", got, want)
	}
}
