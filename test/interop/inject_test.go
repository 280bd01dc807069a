package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
)

// injectFiles are Istio's injection ConfigMap (its config and values keys)
// and mesh config, rendered from Istio's own chart files.
type injectFiles struct{ config, values, mesh string }

var (
	injectOnce sync.Once
	injectDir  string
	injectErr  error
)

// dummyKubeconfig writes a kubeconfig naming a loopback server that is
// never asked (istioctl wants one even when it works offline).
func dummyKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// istioInjectFiles renders Istio's charts (from Istio's module directory)
// with `istioctl manifest generate` once per test binary and keeps the
// istio-sidecar-injector and istio ConfigMaps' data as files.
func istioInjectFiles(t *testing.T) injectFiles {
	t.Helper()
	istioctl := istiobin.Path(t, istiobin.Istioctl)
	mod := istiobin.ModuleDir(t)
	injectOnce.Do(func() {
		injectDir, injectErr = os.MkdirTemp("", "interop-inject-")
		if injectErr != nil {
			return
		}
		cmd := exec.Command(istioctl, "manifest", "generate", "--manifests", filepath.Join(mod, "manifests"))
		cmd.Env = append(os.Environ(), "HOME="+injectDir)
		out, err := cmd.Output()
		if err != nil {
			injectErr = err
			return
		}
		injectErr = splitConfigMaps(injectDir, string(out))
	})
	if injectErr != nil {
		t.Fatalf("render Istio's injection config: %v", injectErr)
	}
	return injectFiles{
		config: filepath.Join(injectDir, "config"),
		values: filepath.Join(injectDir, "values"),
		mesh:   filepath.Join(injectDir, "mesh"),
	}
}

// splitConfigMaps writes the data of the ConfigMaps istio-sidecar-injector
// (config, values) and istio (mesh) found in manifests into dir.
func splitConfigMaps(dir, manifests string) error {
	want := map[string]string{"istio-sidecar-injector/config": "config", "istio-sidecar-injector/values": "values", "istio/mesh": "mesh"}
	found := 0
	for _, doc := range strings.Split(manifests, "\n---") {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil || cm.Kind != "ConfigMap" {
			continue
		}
		for key, v := range cm.Data {
			file, ok := want[cm.Name+"/"+key]
			if !ok {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
				return err
			}
			found++
		}
	}
	if found != len(want) {
		return errNotAllConfigMaps
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNotAllConfigMaps = constError("manifest generate output lacks istio-sidecar-injector config/values or istio mesh")

// kubeInject runs Istio's `istioctl kube-inject` offline on pod with
// Istio's own injection config and returns the injected pod.
func kubeInject(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	files := istioInjectFiles(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "pod.yaml")
	b, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// --revision: else istioctl asks the API server for the default one.
	cmd := exec.Command(istiobin.Path(t, istiobin.Istioctl), "kube-inject", "--revision", "default", "-f", in,
		"--injectConfigFile", files.config, "--valuesFile", files.values, "--meshConfigFile", files.mesh,
		"--kubeconfig", dummyKubeconfig(t, dir))
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("istioctl kube-inject: %v\n%s", err, stderr)
	}
	var injected corev1.Pod
	first, _, _ := strings.Cut(string(out), "\n---")
	if err := yaml.Unmarshal([]byte(first), &injected); err != nil {
		t.Fatalf("parse injected pod: %v\n%s", err, out)
	}
	return &injected
}
