package agenttest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentSideOfTheWire keeps istiod's packages out of the agent's test
// helpers: the agent is tested against the CA API, not against istiod's code.
func TestAgentSideOfTheWire(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/skiff-mesh/skiff/pkg/istiod") {
			t.Errorf("agenttest links %s", dep)
		}
	}
}
