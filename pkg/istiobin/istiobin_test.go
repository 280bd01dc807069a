package istiobin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleDirIsIstio131(t *testing.T) {
	dir := ModuleDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "1.31" {
		t.Errorf("VERSION = %q, want 1.31", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifests", "charts", "istio-control", "istio-discovery", "files", "injection-template.yaml")); err != nil {
		t.Errorf("injection template: %v", err)
	}
}

func TestBinariesReportTheirVersion(t *testing.T) {
	for _, name := range []string{PilotAgent, PilotDiscovery, Istioctl} {
		args := []string{"version"}
		if name == Istioctl {
			args = append(args, "--remote=false")
		}
		out, err := exec.Command(Path(t, name), args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s version: %v\n%s", name, err, out)
			continue
		}
		if !strings.Contains(string(out), "1.31-dev") {
			t.Errorf("%s version does not say 1.31-dev:\n%s", name, out)
		}
	}
}

// TestBuildIsIdempotent: a second build finds the stamp and rebuilds nothing.
func TestBuildIsIdempotent(t *testing.T) {
	bin := Path(t, PilotAgent)
	before, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", Script()).CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "building") {
		t.Errorf("second run rebuilt:\n%s", out)
	}
	after, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("pilot-agent was rewritten")
	}
}
