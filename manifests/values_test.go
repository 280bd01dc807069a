package manifests_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
)

// injectorFromChart renders the istiod chart with values, as `helm install
// istiod --set ...` does, and returns the injector its
// istio-sidecar-injector ConfigMap configures.
func injectorFromChart(t *testing.T, values map[string]any) *inject.Injector {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("charts", "istiod"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "istiod", Namespace: "istio-system", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	out := files["istiod/templates/configmap.yaml"]
	var cm corev1.ConfigMap
	for _, doc := range strings.Split(out, "\n---\n") {
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatalf("configmap.yaml: %v\n%s", err, doc)
		}
		if cm.Data[inject.ConfigKey] != "" {
			break
		}
	}
	cfg, err := inject.ParseConfig([]byte(cm.Data[inject.ConfigKey]), []byte(cm.Data[inject.ValuesKey]))
	if err != nil {
		t.Fatalf("the chart's injector config does not load: %v\n%s", err, cm.Data[inject.ConfigKey])
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// appPod is a plain application pod.
func appPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Labels: map[string]string{"app": "api"}, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "example/api:1"}}},
	}
}

func initNames(p *corev1.Pod) []string {
	var n []string
	for _, c := range p.Spec.InitContainers {
		n = append(n, c.Name)
	}
	return n
}

// TestCNIValues: Istio's current key (pilot.cni.enabled) and the older one
// (istio_cni.enabled) both reach the injector through the ConfigMap and put
// pods in CNI mode.
func TestCNIValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"default", nil, []string{"istio-init"}},
		{"pilot.cni.enabled", map[string]any{"pilot": map[string]any{"cni": map[string]any{"enabled": true}}}, []string{"istio-validation"}},
		{"istio_cni.enabled", map[string]any{"istio_cni": map[string]any{"enabled": true}}, []string{"istio-validation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := injectorFromChart(t, tc.values).Inject(appPod(), "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, initNames(res.Pod)); d != "" {
				t.Errorf("init containers (-want +got):\n%s", d)
			}
		})
	}
}

// TestChartTemplates: the chart's ConfigMap carries the grpc templates
// (injecting what kube-inject's defaults inject), the user's own templates
// and defaultTemplates.
func TestChartTemplates(t *testing.T) {
	grpc := appPod()
	grpc.Annotations["inject.istio.io/templates"] = "grpc-agent"
	want, err := newDefaultInjector(t).Inject(grpc, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := injectorFromChart(t, nil).Inject(grpc, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Pod, got.Pod); d != "" {
		t.Errorf("grpc-agent from the chart differs from kube-inject's (-defaults +chart):\n%s", d)
	}

	own := map[string]any{"sidecarInjectorWebhook": map[string]any{
		"templates":        map[string]any{"marker": "metadata:\n  labels:\n    example.com/marker: \"yes\"\n"},
		"defaultTemplates": []any{"sidecar", "marker"},
	}}
	res, err := injectorFromChart(t, own).Inject(appPod(), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Pod.Labels["example.com/marker"] != "yes" || initNames(res.Pod) == nil {
		t.Errorf("defaultTemplates [sidecar, marker]: labels %v, init containers %v", res.Pod.Labels, initNames(res.Pod))
	}
}

func newDefaultInjector(t *testing.T) *inject.Injector {
	t.Helper()
	cfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
