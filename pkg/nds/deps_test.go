package nds_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionDeps checks that package nds, tests left out, links
// nothing outside the standard library but protowire and what protowire
// needs: not the protobuf runtime, which the agent is to do without.
func TestProductionDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	deps := func(pkg string) []string {
		t.Helper()
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	const self = "github.com/skiff-mesh/skiff/pkg/nds"
	allowed := map[string]bool{self: true}
	for _, p := range deps("google.golang.org/protobuf/encoding/protowire") {
		allowed[p] = true
	}
	got := deps(self)
	for _, p := range got {
		if !allowed[p] {
			t.Errorf("package nds imports %s", p)
		}
	}
	if !strings.Contains(strings.Join(got, " "), "google.golang.org/protobuf/encoding/protowire") {
		t.Errorf("deps %v: protowire missing, is go list looking at the right package?", got)
	}
}
