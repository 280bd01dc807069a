package analyze_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/istioctl"
)

var update = flag.Bool("update", false, "rewrite golden files")

// run runs istioctl (the real command table) and returns the exit code,
// stdout and stderr.
func run(t *testing.T, getenv map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := istioctl.Main(context.Background(), args, &istioctl.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return getenv[k] }})
	return code, out.String(), errOut.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("output differs from %s (-want +got; -update to accept):\n%s", path, d)
	}
}

func TestAnalyzeFiles(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		golden    string // stdout
		stderrHas string
		stderrNot string
	}{
		{"directory, all messages", []string{"--use-kube=false", "-f", "testdata/mesh"}, 79, "mesh.golden",
			"Analyzers found issues when analyzing namespace: default.", ""},
		{"files as arguments, -R", []string{"-k=false", "-R", "testdata/mesh/routes.yaml", "testdata/mesh/services.yaml", "testdata/mesh/policy"}, 79, "mesh.golden", "", ""},
		{"output threshold Error", []string{"--use-kube=false", "-f", "testdata/mesh", "--output-threshold", "error"}, 79, "mesh-errors.golden", "", ""},
		{"suppressed", []string{"--use-kube=false", "-f", "testdata/mesh", "-S", "IST0101=VirtualService reviews.*", "-S", "SKF0001=AuthorizationPolicy *"}, 0, "mesh-suppressed.golden", "", "Analyzers found issues"},
		{"all namespaces", []string{"--use-kube=false", "-f", "testdata/mesh", "-A", "--output-threshold", "Warning"}, 79, "mesh-all.golden", "", ""},
		{"other namespace", []string{"--use-kube=false", "-f", "testdata/mesh", "-n", "other"}, 79, "mesh-other.golden", "", ""},
		{"json", []string{"--use-kube=false", "-f", "testdata/warnonly.yaml", "-o", "json"}, 0, "warnonly.json.golden", "", ""},
		{"warnings pass the default failure threshold", []string{"--use-kube=false", "testdata/warnonly.yaml"}, 0, "warnonly.golden", "", ""},
		{"failure threshold Warning", []string{"--use-kube=false", "testdata/warnonly.yaml", "--failure-threshold", "Warning"}, 79, "warnonly.golden", "Analyzers found issues", ""},
		{"clean", []string{"--use-kube=false", "testdata/clean.yaml"}, 0, "empty.golden", "\u2714 No validation issues found when analyzing testdata/clean.yaml.", ""},
		{"parse error", []string{"--use-kube=false", "testdata/broken.yaml"}, 65, "empty.golden", "unknown field \"rout\"", ""},
		{"parse error ignored", []string{"--use-kube=false", "--ignore-unknown", "testdata/broken.yaml"}, 0, "empty.golden", "(but 1 file could not be parsed)", ""},
		{"list", []string{"-L"}, 0, "list.golden", "", ""},
		{"bad threshold", []string{"--use-kube=false", "--failure-threshold", "fatal"}, 2, "empty-nothing.golden", "want one of Info, Warning, Error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, nil, append([]string{"analyze"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			golden(t, tc.golden, out)
			if !strings.Contains(errOut, tc.stderrHas) {
				t.Errorf("stderr %q does not contain %q", errOut, tc.stderrHas)
			}
			if tc.stderrNot != "" && strings.Contains(errOut, tc.stderrNot) {
				t.Errorf("stderr %q contains %q", errOut, tc.stderrNot)
			}
		})
	}
}
