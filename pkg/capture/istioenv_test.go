package capture

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
)

var (
	istioBindEnv    = regexp.MustCompile(`BindEnv\(fs, constants\.(\w+)`)
	istioExtraEnv   = regexp.MustCompile(`AdditionalEnv\(fs, constants\.\w+, (?:"([A-Z0-9_]+)"|(\w+))\)`)
	istioStringDecl = regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*"([^"]+)"`)
)

// TestIstioVariablesRead reads Istio 1.31's istio-iptables command and
// requires every flag it takes, and every variable it reads (each flag's
// name upper-cased with underscores, as its BindEnv does, and the extra
// names it binds), to be one this parser takes too.
func TestIstioVariablesRead(t *testing.T) {
	dir := istiobin.ModuleDir(t)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	root := read("tools/istio-iptables/pkg/cmd/root.go")
	values := map[string]string{}
	for _, src := range []string{read("tools/istio-iptables/pkg/constants/constants.go"), root} {
		for _, m := range istioStringDecl.FindAllStringSubmatch(src, -1) {
			values[m[1]] = m[2]
		}
	}
	var names []string
	for _, m := range istioBindEnv.FindAllStringSubmatch(root, -1) {
		v, ok := values[m[1]]
		if !ok {
			t.Fatalf("constants.%s: no value in Istio's source", m[1])
		}
		if !slices.ContainsFunc(options, func(o option) bool { return o.long == v }) {
			t.Errorf("Istio's istio-iptables takes --%s; this parser does not", v)
		}
		names = append(names, strings.ToUpper(strings.ReplaceAll(v, "-", "_")))
	}
	for _, m := range istioExtraEnv.FindAllStringSubmatch(root, -1) {
		if m[1] != "" {
			names = append(names, m[1])
		} else if v, ok := values[m[2]]; ok {
			names = append(names, v)
		} else {
			t.Fatalf("%s: no value in Istio's source", m[2])
		}
	}
	if len(names) < 30 {
		t.Fatalf("only %d variables read from Istio's istio-iptables: has the extraction broken?", len(names))
	}
	var ours []string
	for _, o := range options {
		ours = append(ours, o.envs...)
	}
	for _, n := range names {
		if !slices.Contains(ours, n) {
			t.Errorf("Istio's istio-iptables reads %s; this parser does not", n)
		}
	}
}
