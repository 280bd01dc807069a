package istioctl

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files")

func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

func TestKubeInjectGolden(t *testing.T) {
	code, out, errOut := run(t, "", "kube-inject", "-f", "testdata/bookinfo.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "not injected: sidecar.istio.io/inject annotation is false") {
		t.Errorf("stderr %q does not say why the pod was left alone", errOut)
	}
	golden := filepath.Join("testdata", "bookinfo.injected.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), out); d != "" {
		t.Errorf("output differs from %s (-want +got; -update to accept):\n%s", golden, d)
	}
	docs := strings.Split(out, "---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "istio-init" || len(spec.Containers) != 2 {
		t.Fatalf("deployment not injected: %+v", spec)
	}
	if got := strings.Join(spec.InitContainers[0].Args, " "); !strings.Contains(got, "-o 5432") {
		t.Errorf("init args %q lack the annotation's -o 5432", got)
	}
	var env string
	for _, e := range spec.Containers[1].Env {
		if e.Name == "ISTIO_META_WORKLOAD_NAME" || e.Name == "ISTIO_META_OWNER" {
			env += e.Value + " "
		}
	}
	if env != "reviews-v1 kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/reviews-v1 " {
		t.Errorf("workload env %q", env)
	}
	if len(d.Spec.Template.OwnerReferences) != 0 {
		t.Error("the injector's owner reference leaked into the template")
	}
	var p corev1.Pod
	if err := yaml.Unmarshal([]byte(docs[2]), &p); err != nil || len(p.Spec.Containers) != 1 {
		t.Errorf("opted-out pod changed: %v %+v", err, p.Spec)
	}
}

func TestKubeInjectFlags(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte("istio_cni: {enabled: true}\nglobal: {hub: example.org/mesh, tag: \"1.0\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mesh := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(mesh, []byte("defaultConfig:\n  discoveryAddress: istiod-canary.istio-system.svc:15012\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: app, image: app}]\n"
	outFile := filepath.Join(dir, "out.yaml")
	code, _, errOut := run(t, pod, "kube-inject", "-f", "-", "--valuesFile", values, "--meshConfigFile", mesh, "--revision", "canary", "-o", outFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: istio-validation", "--run-validation", "example.org/mesh/proxyv2:1.0", "istiod-canary.istio-system.svc:15012", "istio.io/rev: canary"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestUsage(t *testing.T) {
	if code, out, _ := run(t, ""); code != ExitUsage || !strings.Contains(out, "kube-inject") {
		t.Errorf("no args: exit %d, %q", code, out)
	}
	if code, _, errOut := run(t, "", "nope"); code != ExitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "kube-inject"); code != ExitUsage || !strings.Contains(errOut, "--filename") {
		t.Errorf("missing -f: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "kube-inject", "-f", "testdata/nope.yaml"); code != ExitError || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
	bad := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {traffic.sidecar.istio.io/includeInboundPorts: x}}\nspec: {containers: [{name: a}]}\n"
	if code, _, errOut := run(t, bad, "kube-inject", "-f", "-"); code != ExitError || !strings.Contains(errOut, "includeInboundPorts") {
		t.Errorf("bad annotation: exit %d, %q", code, errOut)
	}
}
