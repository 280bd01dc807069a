package istioctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject/istiochart"
)

// TestKubeInjectWithIstiosConfigMap runs kube-inject with the
// istio-sidecar-injector ConfigMap and mesh config Istio 1.31's chart
// renders (read from the module cache, unchanged) on Istio's own hello.yaml
// and compares the pod template with the one Istio's kube-inject writes
// (native sidecars off, as kube-inject does without a cluster).
func TestKubeInjectWithIstiosConfigMap(t *testing.T) {
	dir := istiochart.Source(t)
	inst := istiochart.MustRender(t, map[string]any{})
	tmp := t.TempDir()
	cm, err := yaml.Marshal(inst.InjectorConfigMap())
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := yaml.Marshal(inst.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	cmFile, meshFile := filepath.Join(tmp, "injector.yaml"), filepath.Join(tmp, "mesh.yaml")
	for f, b := range map[string][]byte{cmFile: cm, meshFile: mesh} {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "pkg", "kube", "inject", "testdata", "inject")
	code, out, errOut := run(t, "", "kube-inject", "-f", filepath.Join(data, "hello.yaml"),
		"--injectConfigFile", cmFile, "--meshConfigFile", meshFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join(data, "hello-old-version.yaml.injected"))
	if err != nil {
		t.Fatal(err)
	}
	got := podTemplate(t, out)
	if len(got.Spec.Containers) != 2 || got.Spec.Containers[1].Name != "istio-proxy" || len(got.Spec.InitContainers) != 1 {
		t.Fatalf("not injected: %d containers, %d init containers", len(got.Spec.Containers), len(got.Spec.InitContainers))
	}
	if d := cmp.Diff(podTemplate(t, string(want)), got); d != "" {
		t.Errorf("pod template differs from Istio's kube-inject (-Istio +Skiff):\n%s", d)
	}
}

// podTemplate is the first document's pod template, without the
// sidecar.istio.io/status annotation (its list order is not compared).
func podTemplate(t *testing.T, docs string) corev1.PodTemplateSpec {
	t.Helper()
	first, _, _ := strings.Cut(docs, "\n---")
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(first), &d); err != nil {
		t.Fatal(err)
	}
	delete(d.Spec.Template.Annotations, "sidecar.istio.io/status")
	return d.Spec.Template
}
