// Package istiochart renders Istio's own istio-discovery chart, read from
// the Go module cache, for tests that check Skiff against what Istio
// installs: the istio-sidecar-injector ConfigMap's keys and the istio
// ConfigMap's mesh config. Nothing of Istio's is copied into this
// repository; only tests import this package.
package istiochart

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Module is the Istio release Skiff's injector must match (1.31).
const Module = "istio.io/istio@v0.0.0-20260827124520-eed52ebb66ad"

var (
	dirOnce sync.Once
	dir     string
	dirErr  error
)

// Dir is Istio's module directory (`go mod download -json`), or an error
// when the module cannot be had (offline without a module cache).
func Dir() (string, error) {
	dirOnce.Do(func() {
		out, err := exec.Command("go", "mod", "download", "-json", Module).Output()
		if err != nil {
			dirErr = fmt.Errorf("go mod download %s: %w", Module, err)
			return
		}
		var m struct{ Dir, Error string }
		if err := json.Unmarshal(out, &m); err != nil {
			dirErr = fmt.Errorf("go mod download %s: %w", Module, err)
			return
		}
		if m.Dir == "" {
			dirErr = fmt.Errorf("go mod download %s: %s", Module, m.Error)
			return
		}
		dir = m.Dir
	})
	return dir, dirErr
}

// Install is what Istio's chart installs for the injector.
type Install struct {
	// Config and Values are the istio-sidecar-injector ConfigMap's keys.
	Config, Values []byte
	// Mesh is the istio ConfigMap's mesh config.
	Mesh map[string]any
}

// Source returns Istio's module directory (Dir), or skips t when the
// module cannot be had (offline without a module cache).
func Source(t testing.TB) string {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Skipf("Istio's module is not available: %v", err)
	}
	return dir
}

// MustRender is Render of Source's chart for t, which fails on an error.
func MustRender(t testing.TB, vals map[string]any) Install {
	t.Helper()
	inst, err := Render(Source(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// InjectorConfigMap is the istio-sidecar-injector ConfigMap Istio's chart
// installs, with i's keys.
func (i Install) InjectorConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Namespace: "istio-system"},
		Data:       map[string]string{"config": string(i.Config), "values": string(i.Values)}}
}

// Render renders the istio-discovery chart of the module in dir with the
// helm library, as `helm template` does, with vals as the user's values.
func Render(dir string, vals map[string]any) (Install, error) {
	path := filepath.Join(dir, "manifests", "charts", "istio-control", "istio-discovery")
	ch, err := loader.LoadDir(path)
	if err != nil {
		return Install{}, fmt.Errorf("load Istio's chart: %w", err)
	}
	rel := chartutil.ReleaseOptions{Name: "istiod", Namespace: "istio-system", IsInstall: true, Revision: 1}
	rv, err := chartutil.ToRenderValues(ch, vals, rel, chartutil.DefaultCapabilities)
	if err != nil {
		return Install{}, fmt.Errorf("Istio's chart values: %w", err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return Install{}, fmt.Errorf("render Istio's chart: %w", err)
	}
	var got Install
	for name, text := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return Install{}, fmt.Errorf("%s: %w", name, err)
			}
			var cm corev1.ConfigMap
			if yaml.Unmarshal(doc, &cm) != nil || cm.Kind != "ConfigMap" {
				continue
			}
			switch cm.Name {
			case "istio-sidecar-injector":
				got.Config, got.Values = []byte(cm.Data["config"]), []byte(cm.Data["values"])
			case "istio":
				if err := yaml.Unmarshal([]byte(cm.Data["mesh"]), &got.Mesh); err != nil {
					return Install{}, fmt.Errorf("Istio's mesh config: %w", err)
				}
			}
		}
	}
	if got.Config == nil || got.Mesh == nil {
		return Install{}, errors.New("Istio's chart rendered no istio-sidecar-injector or istio ConfigMap")
	}
	return got, nil
}
