package inject_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject/istiochart"
)

// istioInstall is what Istio's istio-discovery chart installs for some values.
type istioInstall = istiochart.Install

// renderIstioChart renders Istio's istio-discovery chart with vals as the
// user's values.
func renderIstioChart(t *testing.T, vals map[string]any) istioInstall {
	t.Helper()
	return istiochart.MustRender(t, vals)
}

// istioValues turns the settings of a case of Istio's injector test into
// the chart's values: istioctl's --set paths (values.X is the chart's X;
// components.cni.enabled turns on the chart's cni.enabled) and an
// IstioOperator file's spec.values and spec.meshConfig.
func istioValues(t *testing.T, sets []string, iopFile string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if iopFile != "" {
		b, err := os.ReadFile(iopFile)
		if err != nil {
			t.Fatal(err)
		}
		var iop struct {
			Spec struct {
				Values     map[string]any `json:"values"`
				MeshConfig map[string]any `json:"meshConfig"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &iop); err != nil {
			t.Fatalf("%s: %v", iopFile, err)
		}
		vals = iop.Spec.Values
		if vals == nil {
			vals = map[string]any{}
		}
		if iop.Spec.MeshConfig != nil {
			vals["meshConfig"] = iop.Spec.MeshConfig
		}
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("--set %q: want path=value", s)
		}
		switch {
		case k == "components.cni.enabled":
			k = "cni.enabled"
		case strings.HasPrefix(k, "values."):
			k = strings.TrimPrefix(k, "values.")
		default:
			t.Fatalf("--set %q: not a values path", s)
		}
		setPath(vals, strings.Split(k, "."), scalar(v))
	}
	return vals
}

// scalar reads a --set value as istioctl does: booleans and integers
// typed, anything else a string (commas included).
func scalar(v string) any {
	if v == "true" || v == "false" {
		return v == "true"
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	return v
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// podsOf converts a document of Istio's test data to the pods the webhook
// would see, as Istio's test does: a workload's pod template owned by it
// (a Deployment's through a ReplicaSet NAME-fake with pod-template-hash
// fake), with the document's namespace.
func podsOf(t *testing.T, doc []byte) []*corev1.Pod {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		t.Fatal(err)
	}
	kind, _ := obj["kind"].(string)
	if kind == "List" {
		var out []*corev1.Pod
		items, _ := obj["items"].([]any)
		for _, it := range items {
			b, _ := json.Marshal(it)
			out = append(out, podsOf(t, b)...)
		}
		return out
	}
	var w struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Template    *corev1.PodTemplateSpec `json:"template"`
			JobTemplate struct {
				Spec struct {
					Template *corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			} `json:"jobTemplate"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &w); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	switch kind {
	case "Pod":
		if err := yaml.Unmarshal(doc, &pod); err != nil {
			t.Fatal(err)
		}
		pod.TypeMeta = metav1.TypeMeta{}
		return []*corev1.Pod{&pod}
	case "Deployment", "DaemonSet", "ReplicaSet", "ReplicationController", "StatefulSet", "Job", "DeploymentConfig", "CronJob":
	default:
		return nil
	}
	tmpl := w.Spec.Template
	if kind == "CronJob" {
		tmpl = w.Spec.JobTemplate.Spec.Template
	}
	if tmpl == nil {
		return nil
	}
	pod.ObjectMeta, pod.Spec = tmpl.ObjectMeta, tmpl.Spec
	owner, ownerKind, apiVersion := w.Metadata.Name, kind, w.APIVersion
	if kind == "Deployment" {
		owner, ownerKind, apiVersion = w.Metadata.Name+"-fake", "ReplicaSet", "apps/v1"
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["pod-template-hash"] = "fake"
	}
	yes := true
	pod.GenerateName = owner
	if kind == "Deployment" {
		pod.GenerateName += "-"
	}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: ownerKind, Name: owner, Controller: &yes}}
	pod.Namespace = w.Metadata.Namespace
	return []*corev1.Pod{&pod}
}

// documents splits YAML into its documents.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(strings.TrimSpace(string(doc))) > 0 && strings.TrimSpace(string(doc)) != "---" {
			out = append(out, doc)
		}
	}
}

// podsFrom is every pod of a test data file.
func podsFrom(t *testing.T, path string) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for _, doc := range documents(t, path) {
		out = append(out, podsOf(t, doc)...)
	}
	return out
}
