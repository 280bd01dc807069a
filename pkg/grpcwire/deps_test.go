package grpcwire_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGRPCGo keeps grpc-go, protobuf and x/net out of the package: it
// exists so the agent's binary can drop them.
func TestNoGRPCGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/skiff-mesh/skiff/pkg/grpcwire").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "golang.org/x/net"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("grpcwire links %s", dep)
			}
		}
	}
}
