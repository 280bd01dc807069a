package install

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
)

// runtimeView is a conflist as the runtime hands it to its plugins: the
// list's own keys, and each plugin's keys without name and cniVersion,
// which libcni sets from the list. Our entry is counted, not compared:
// its keys are the installer's configuration, not the file's.
type runtimeView struct {
	List    map[string]any
	Plugins []map[string]any
	Ours    int
}

func viewOf(t *testing.T, data []byte) runtimeView {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	v := runtimeView{List: maps.Clone(top)}
	delete(v.List, "plugins")
	plugins, _ := top["plugins"].([]any)
	for i, p := range plugins {
		m, _ := p.(map[string]any)
		if m["type"] == PluginType {
			v.Ours++
			if i != len(plugins)-1 {
				t.Errorf("our entry is plugin %d of %d, not last", i+1, len(plugins))
			}
			continue
		}
		m = maps.Clone(m)
		delete(m, "name")
		delete(m, "cniVersion")
		v.Plugins = append(v.Plugins, m)
	}
	return v
}

// TestInsertAsIstio puts our entry into the CNI configurations of Istio's
// own installer tests (cni/pkg/install/testdata in Istio's module) and
// requires what Istio's installer makes of them, as the runtime sees it:
// the same list keys and the same plugins in the same order, our entry
// once and last, and the same refusals.
func TestInsertAsIstio(t *testing.T) {
	dir := filepath.Join(istiobin.ModuleDir(t), "cni/pkg/install/testdata")
	for _, tc := range []struct {
		file  string
		fails bool
		// differs names a deliberate difference of docs/cni-plugin.md in
		// the list's own keys.
		differs string
	}{
		{file: "invalid-map.conflist", fails: true},
		{file: "invalid-arr.conflist", fails: true},
		{file: "bridge.conf", differs: "a .conf made a list keeps its network name and version"},
		{file: "list.conflist"},
		{file: "list-with-istio.conflist"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Insert(in, entry())
			if tc.fails {
				if err == nil {
					t.Fatalf("Istio's installer refuses %s; Skiff's made:\n%s", tc.file, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden, err := os.ReadFile(filepath.Join(dir, tc.file+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			got, want := viewOf(t, out), viewOf(t, golden)
			if got.Ours != 1 || want.Ours != 1 {
				t.Errorf("our entry appears %d times (Istio's: %d), want once", got.Ours, want.Ours)
			}
			if d := cmp.Diff(want.Plugins, got.Plugins); d != "" {
				t.Errorf("the other plugins differ from Istio's (-istio +skiff):\n%s", d)
			}
			switch d := cmp.Diff(want.List, got.List); {
			case tc.differs == "" && d != "":
				t.Errorf("the list's keys differ from Istio's (-istio +skiff):\n%s", d)
			case tc.differs != "" && d == "":
				t.Errorf("documented difference %q is gone", tc.differs)
			case tc.differs != "":
				t.Logf("deliberate difference (%s) (-istio +skiff):\n%s", tc.differs, d)
			}
		})
	}
}

// TestKubeconfigAsIstio writes the plugin's kubeconfig with the inputs of
// Istio's own installer tests and requires the kubeconfig Istio's
// installer writes for them (its testdata goldens), as YAML values.
func TestKubeconfigAsIstio(t *testing.T) {
	dir := filepath.Join(istiobin.ModuleDir(t), "cni/pkg/install/testdata")
	for _, tc := range []struct {
		golden string
		skip   bool
	}{{"kubeconfig-tls", false}, {"kubeconfig-skip-tls", true}} {
		t.Run(tc.golden, func(t *testing.T) {
			tr := newTree(t)
			tr.cfg.KubeHost, tr.cfg.KubePort = "10.96.0.1", 443
			tr.cfg.KubeCAFile, tr.cfg.SkipTLSVerify = filepath.Join(dir, "kube-ca.crt"), tc.skip
			must(t, os.WriteFile(tr.cfg.TokenPath, []byte("service_account_token_string"), 0o600))
			in, err := New(tr.cfg, discard())
			if err != nil {
				t.Fatal(err)
			}
			out, err := in.Kubeconfig()
			if err != nil {
				t.Fatal(err)
			}
			golden, err := os.ReadFile(filepath.Join(dir, tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			must(t, yaml.Unmarshal(out, &got))
			must(t, yaml.Unmarshal(golden, &want))
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("kubeconfig differs from Istio's (-istio +skiff):\n%s", d)
			}
		})
	}
}
