package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the other side of the wire out of pilot-agent: it
// speaks to istiod over gRPC and links none of istiod's or istioctl's
// packages, nor client-go; nor client_golang and its protobuf types (the
// agent's metrics are pkg/promtext's). Off Linux it leaves out the capture
// packages.
func TestDependencies(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list: %v", goos, err)
		}
		banned := []string{"github.com/skiff-mesh/skiff/pkg/istiod", "github.com/skiff-mesh/skiff/pkg/istioctl", "k8s.io/client-go", "github.com/prometheus/"}
		if goos != "linux" {
			banned = append(banned, "github.com/skiff-mesh/skiff/pkg/capture")
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("GOOS=%s: pilot-agent links %s", goos, dep)
				}
			}
		}
	}
}
