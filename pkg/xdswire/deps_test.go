package xdswire_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDeps checks that the package (its production files) links nothing of
// grpc, the generated Envoy and Istio types or the protobuf runtime: from
// outside the standard library, only protowire and the two internal packages
// protowire itself imports.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{
		"github.com/skiff-mesh/skiff/pkg/xdswire",
		"google.golang.org/protobuf/encoding/protowire",
		"google.golang.org/protobuf/internal/detrand",
		"google.golang.org/protobuf/internal/errors",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("non-standard dependencies:\n%s\nwant only:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// protowire's own dependencies are the allowance above: if a new
	// protobuf release changes them, this says so rather than failing
	// obscurely.
	out, err = exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"google.golang.org/protobuf/encoding/protowire").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pw := strings.Fields(string(out))
	slices.Sort(pw)
	if !slices.Equal(pw, want[1:]) {
		t.Errorf("protowire now depends on:\n%s", strings.Join(pw, "\n"))
	}
}
