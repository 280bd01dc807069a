package mesh_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// changes subscribes to w and returns the trust domains of its changes.
func changes(w *mesh.Watcher) <-chan string {
	ch := make(chan string, 10)
	w.Subscribe(func(m *meshconfig.MeshConfig) { ch <- m.GetTrustDomain() })
	return ch
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case td := <-ch:
		return td
	case <-time.After(30 * time.Second):
		t.Fatal("no mesh config change seen")
		return ""
	}
}

// TestWatchFile follows a file edited as the kubelet edits a mounted
// ConfigMap (a new file renamed over the old), skipping a bad edit.
func TestWatchFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mesh")
	write := func(doc string) {
		t.Helper()
		tmp := filepath.Join(dir, ".mesh.tmp")
		if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("trustDomain: one.org\n")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := mesh.Watch(ctx, mesh.Source{File: path}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Mesh().GetTrustDomain(); got != "one.org" {
		t.Fatalf("first config: trust domain %q", got)
	}
	ch := changes(w)
	write("outboundTrafficPolicy: {mode: SOMETIMES}\n") // refused: kept
	write("trustDomain: two.org\n")
	if got := next(t, ch); got != "two.org" {
		t.Fatalf("change: trust domain %q, want two.org (the bad edit skipped)", got)
	}
}

func TestWatchBadFirstFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh")
	if err := os.WriteFile(path, []byte("defaultConfig: {statusPort: many}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.Watch(t.Context(), mesh.Source{File: path}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a first mesh config that does not parse must fail")
	}
}

// TestWatchConfigMap follows the revision's mesh ConfigMap on a real API
// server: defaults until it exists, then each valid edit; another
// revision's ConfigMap is not read.
func TestWatchConfigMap(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	const ns = "istio-system"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio", Namespace: ns},
		Data: map[string]string{mesh.Key: "trustDomain: default-revision.org\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := mesh.ConfigMapName("canary")
	w, err := mesh.Watch(ctx, mesh.Source{File: filepath.Join(t.TempDir(), "absent"), Client: env.Client.CoreV1().RESTClient(), Namespace: ns, Name: name}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Mesh().GetTrustDomain(); got != "cluster.local" {
		t.Fatalf("before the ConfigMap exists: trust domain %q, want the default", got)
	}
	ch := changes(w)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{mesh.Key: "trustDomain: canary.org\n"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ch); got != "canary.org" {
		t.Fatalf("created: trust domain %q", got)
	}
	cm.Data[mesh.Key] = "trustDomain: [not, a, string]\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data[mesh.Key] = "trustDomain: edited.org\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ch); got != "edited.org" {
		t.Fatalf("edited: trust domain %q, want edited.org (the bad edit skipped)", got)
	}
}
