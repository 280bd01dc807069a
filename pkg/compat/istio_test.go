package compat_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/agent/cli"
	"github.com/skiff-mesh/skiff/pkg/capture"
	"github.com/skiff-mesh/skiff/pkg/cni/install"
	"github.com/skiff-mesh/skiff/pkg/compat"
	"github.com/skiff-mesh/skiff/pkg/istiod"
)

// istioModule is Istio 1.31 as the Go module proxy serves it.
const istioModule = "istio.io/istio@v0.0.0-20260827124520-eed52ebb66ad"

// istioDir downloads Istio's module (once per machine: the module cache
// keeps it) and returns its directory.
func istioDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", istioModule)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", istioModule, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", istioModule, err, m.Error)
	}
	return m.Dir
}

var (
	envName  = regexp.MustCompile(`- name: "?([A-Z][A-Z0-9_]+)"?\s*$`)
	flagName = regexp.MustCompile(`^\s*-\s+"?(--?[a-zA-Z][a-zA-Z0-9_-]*)`)
	cmKey    = regexp.MustCompile(`^\s*([A-Z][A-Z0-9_]{2,}):`)
)

// TestIstioManifestsListed reads Istio 1.31's charts and templates and
// requires every variable and argument they pass to be in the table, for
// one of the binaries the file feeds.
func TestIstioManifestsListed(t *testing.T) {
	dir := istioDir(t)
	files := []struct {
		path     string
		binaries []compat.Binary
		keys     bool // a ConfigMap read as env: KEY: value lines
		noFlags  bool // its commands are the app's shell, not ours
	}{
		{"manifests/charts/istio-control/istio-discovery/templates/deployment.yaml", []compat.Binary{compat.PilotDiscovery}, false, false},
		{"manifests/charts/istio-control/istio-discovery/files/injection-template.yaml", []compat.Binary{compat.PilotAgent, compat.IstioIptables}, false, false},
		{"manifests/charts/istio-control/istio-discovery/files/gateway-injection-template.yaml", []compat.Binary{compat.PilotAgent}, false, false},
		{"manifests/charts/istio-control/istio-discovery/files/grpc-agent.yaml", []compat.Binary{compat.PilotAgent, compat.App}, false, false},
		{"manifests/charts/istio-control/istio-discovery/files/grpc-simple.yaml", []compat.Binary{compat.App}, false, true},
		{"manifests/charts/istio-cni/templates/daemonset.yaml", []compat.Binary{compat.InstallCNI}, false, false},
		{"manifests/charts/istio-cni/templates/configmap-cni.yaml", []compat.Binary{compat.InstallCNI}, true, false},
	}
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.path))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, line := range strings.Split(string(b), "\n") {
			if m := envName.FindStringSubmatch(line); m != nil {
				names = append(names, m[1])
			}
			if m := flagName.FindStringSubmatch(line); m != nil && !f.noFlags {
				names = append(names, m[1])
			}
			if m := cmKey.FindStringSubmatch(line); f.keys && m != nil {
				names = append(names, m[1])
			}
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			total++
			if !slices.ContainsFunc(f.binaries, func(bin compat.Binary) bool { _, ok := compat.Lookup(bin, n); return ok }) {
				t.Errorf("%s passes %s, which pkg/compat does not list for %v", f.path, n, f.binaries)
			}
		}
	}
	if total < 100 {
		t.Fatalf("only %d names read from Istio's files: has the extraction broken?", total)
	}
	t.Logf("%d names read from %d Istio files", total, len(files))
}

// TestFlagsParse parses every listed argument with its binary's own parser.
func TestFlagsParse(t *testing.T) {
	noEnv := func(string) string { return "" }
	noLookup := func(string) (string, bool) { return "", false }
	for _, e := range compat.Entries() {
		if !e.IsFlag() {
			continue
		}
		arg := []string{e.Name}
		if e.Example != "" {
			arg = append(arg, e.Example)
		}
		var err error
		switch e.Binary {
		case compat.PilotDiscovery:
			_, err = istiod.ParseFlags(append([]string{"discovery", "--config-dir", t.TempDir()}, arg...), noEnv, io.Discard)
		case compat.PilotAgent:
			cmd := []string{"proxy", "sidecar"}
			switch e.Name {
			case "--url":
				cmd = []string{"wait"}
			case "--debug-port":
				cmd = []string{"request"}
			}
			err = cli.Check(append(cmd, arg...))
		case compat.IstioIptables:
			_, err = capture.Parse(arg, capture.Environment{Getenv: noLookup}, io.Discard)
		case compat.InstallCNI:
			_, err = install.ParseFlags(arg, noLookup, io.Discard)
		default:
			t.Errorf("%s %s: no parser for this binary", e.Binary, e.Name)
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", e.Binary, strings.Join(arg, " "), err)
		}
	}
}

var registerVar = regexp.MustCompile(`\w*env\.Register\w*\(\s*"([A-Z][A-Z0-9_]+)"`)

// TestIstioAgentVariablesListed reads the Go source of Istio 1.31's
// pilot-agent (its command, its agent and its node agent) and requires
// every variable it registers to be listed for pilot-agent: users set them
// in the pod's environment or the mesh's proxyMetadata, and each must be
// applied or reported, never silently ignored.
func TestIstioAgentVariablesListed(t *testing.T) {
	names := registered(t, "pilot/cmd/pilot-agent", "pkg/istio-agent", "security/pkg/nodeagent")
	for _, n := range names {
		if _, ok := compat.Lookup(compat.PilotAgent, n); !ok {
			t.Errorf("Istio's pilot-agent reads %s, which pkg/compat does not list for pilot-agent", n)
		}
	}
	if len(names) < 40 {
		t.Fatalf("only %d variables read from Istio's agent: has the extraction broken?", len(names))
	}
	t.Logf("%d variables of Istio's agent", len(names))
}

// TestIstioDiscoveryVariablesListed reads the Go source of Istio 1.31's
// istiod (its feature switches and its bootstrap) and requires every
// variable it registers to be in the table for pilot-discovery or in the
// list of variables Skiff's istiod does not read, and that list to hold
// nothing Istio does not register or the table already has.
func TestIstioDiscoveryVariablesListed(t *testing.T) {
	names := registered(t, "pilot/pkg/features", "pilot/pkg/bootstrap", "pkg/features")
	unread := compat.Unread(compat.PilotDiscovery)
	for _, n := range names {
		_, listed := compat.Lookup(compat.PilotDiscovery, n)
		if _, ignored := slices.BinarySearch(unread, n); !listed && !ignored {
			t.Errorf("Istio's istiod reads %s, which pkg/compat neither lists nor counts as unread", n)
		}
	}
	for _, n := range unread {
		if _, listed := compat.Lookup(compat.PilotDiscovery, n); listed {
			t.Errorf("%s is both in the table and unread", n)
		}
		if !slices.Contains(names, n) {
			t.Errorf("%s is counted as unread, but Istio's istiod does not register it", n)
		}
	}
	if !slices.IsSorted(unread) {
		t.Error("the unread list is not sorted")
	}
	if len(names) < 150 {
		t.Fatalf("only %d variables read from Istio's istiod: has the extraction broken?", len(names))
	}
	t.Logf("%d variables of Istio's istiod, %d of them unread by Skiff's", len(names), len(unread))
}

// registered returns the variables registered (env.Register and its
// kin) in the non-test Go files under Istio's directories roots.
func registered(t *testing.T, roots ...string) []string {
	t.Helper()
	dir := istioDir(t)
	var names []string
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join(dir, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range registerVar.FindAllSubmatch(b, -1) {
				names = append(names, string(m[1]))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

var (
	cniParameter = regexp.MustCompile(`register\w+Parameter\(\s*constants\.(\w+)`)
	cniConstant  = regexp.MustCompile(`(?m)^\s*(\w+)\s*=\s*"([a-z0-9-]+)"`)
)

// TestIstioInstallCNIVariablesListed reads Istio 1.31's install-cni command
// and constants and requires every variable it reads (each parameter's
// name, upper-cased with underscores, as its viper binding does) to be
// listed for install-cni, and each parameter's flag to be one Skiff's
// install-cni takes.
func TestIstioInstallCNIVariablesListed(t *testing.T) {
	dir := istioDir(t)
	root, err := os.ReadFile(filepath.Join(dir, "cni/pkg/cmd/root.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts, err := os.ReadFile(filepath.Join(dir, "cni/pkg/constants/constants.go"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, m := range cniConstant.FindAllStringSubmatch(string(consts), -1) {
		values[m[1]] = m[2]
	}
	n := 0
	for _, m := range cniParameter.FindAllStringSubmatch(string(root), -1) {
		v, ok := values[m[1]]
		if !ok {
			t.Errorf("constants.%s: no value found in Istio's constants", m[1])
			continue
		}
		n++
		name := strings.ToUpper(strings.ReplaceAll(v, "-", "_"))
		if _, ok := compat.Lookup(compat.InstallCNI, name); !ok {
			t.Errorf("Istio's install-cni reads %s, which pkg/compat does not list for install-cni", name)
		}
		noEnv := func(string) (string, bool) { return "", false }
		if _, err := install.ParseFlags([]string{"--" + v + "=1"}, noEnv, io.Discard); err != nil && strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("Istio's install-cni takes --%s; Skiff's: %v", v, err)
		}
	}
	if n < 25 {
		t.Fatalf("only %d parameters read from Istio's install-cni: has the extraction broken?", n)
	}
}

var cobraFlag = regexp.MustCompile(`Flags\(\)\.(\w+?)VarP?\(&?[\w.]+,\s*"([^"]+)"`)

// sampleValue is a value of a flag's kind that its parser accepts.
var sampleValue = map[string]string{
	"String": "x", "StringSlice": "x", "Bool": "true", "Int": "1", "Int32": "1", "Uint16": "1",
	"Float32": "1", "Duration": "1s", "StringToString": "a=b",
}

// TestIstioFlagsParse reads the flags Istio 1.31's pilot-agent (proxy,
// wait, request) and pilot-discovery commands define and parses each, with
// a value of its kind, by Skiff's binary: a user's extra argument that
// Istio takes never stops Skiff's.
func TestIstioFlagsParse(t *testing.T) {
	dir := istioDir(t)
	noEnv := func(string) string { return "" }
	// A few flags take a value Skiff checks; the sample is one both take.
	override := map[string]string{"grpcAddr": ":15010", "secureGRPCAddr": ":15012", "httpAddr": ":8080", "monitoringAddr": ":15014",
		"httpsAddr": ":15017", "tls-min-version": "TLSV1_2", "debug-port": "15000", "url": "http://localhost:15021/healthz/ready"}
	n := 0
	for _, f := range []struct {
		file string
		cmd  []string
	}{
		{"pilot/cmd/pilot-agent/app/cmd.go", []string{"proxy", "sidecar"}},
		{"pilot/cmd/pilot-agent/app/wait.go", []string{"wait"}},
		{"pilot/cmd/pilot-agent/app/request.go", []string{"request"}},
		{"pilot/cmd/pilot-discovery/app/cmd.go", nil},
		{"pkg/keepalive/options.go", nil},
		{"pkg/ctrlz/options.go", nil},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cobraFlag.FindAllStringSubmatch(string(b), -1) {
			kind, name := m[1], m[2]
			v, ok := override[name]
			if !ok {
				if v, ok = sampleValue[kind]; !ok {
					t.Errorf("%s: --%s is a %s flag, which this test has no value for", f.file, name, kind)
					continue
				}
			}
			n++
			arg := "--" + name + "=" + v
			switch {
			case f.cmd == nil && (name == "kubeconfig" || name == "configDir"):
				_, err = istiod.ParseFlags([]string{"discovery", arg}, noEnv, io.Discard) // itself the config source
			case f.cmd == nil:
				_, err = istiod.ParseFlags([]string{"discovery", "--config-dir", t.TempDir(), arg}, noEnv, io.Discard)
			default:
				err = cli.Check(append(slices.Clone(f.cmd), arg))
			}
			if err != nil {
				t.Errorf("Istio's %s takes %s; Skiff's: %v", f.file, arg, err)
			}
		}
	}
	if n < 35 {
		t.Fatalf("only %d flags read from Istio's commands: has the extraction broken?", n)
	}
	t.Logf("%d of Istio's flags parsed", n)
}
