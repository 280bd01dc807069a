package status

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoPrometheusDeps: the status server and the DNS proxy write their
// metrics with pkg/promtext, and link none of client_golang,
// client_model's protobuf types, expfmt or procfs.
func TestNoPrometheusDeps(t *testing.T) {
	for _, pkg := range []string{"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy", "github.com/skiff-mesh/skiff/pkg/agent/status"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/prometheus/") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
