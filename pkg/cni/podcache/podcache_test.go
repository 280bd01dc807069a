package podcache

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestPublishesTheNodesPods: against a real API server, the cache keeps a
// file for each pod bound to its node and none for others, follows a pod
// created, changed and deleted after it started, starts from an empty dir
// and holds its owner lock; a second cache on the same dir waits, and takes
// over when the first stops; the last leaves only the unlocked owner file.
func TestPublishesTheNodesPods(t *testing.T) {
	if _, err := kubetest.AssetsDir(); err != nil {
		t.Skip(err) // built by `make k8s-assets`, which `make test` runs first
	}
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	pods := env.Client.CoreV1().Pods("default")
	pod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"sidecar.istio.io/status": "{}"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("here", "node-a")
	pod("there", "node-b")
	core, err := kuberest.NewCore(env.Config, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(core, "node-a", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run", cni.PodCacheDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := cni.PodFile(dir, "default", "gone")
	if err := os.WriteFile(stale, []byte(`{"metadata":{"name":"gone","namespace":"default"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Publish(sctx, dir) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	read := func(name string) *cni.Pod {
		b, err := os.ReadFile(cni.PodFile(dir, "default", name))
		if err != nil {
			return nil
		}
		var p cni.Pod
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &p
	}
	polltest.Until(t, "the cache publishes pod here", func() bool { return read("here") != nil })
	p := read("here")
	live, err := pods.Get(ctx, "here", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata.Annotations["sidecar.istio.io/status"] != "{}" || p.Spec.Containers[0].Name != "app" || p.Metadata.UID != string(live.UID) {
		t.Errorf("here: %+v", p)
	}
	if read("there") != nil {
		t.Error("a pod of another node was published")
	}
	if read("gone") != nil {
		t.Error("a file from before the cache started is still there")
	}
	if st, err := os.Stat(cni.PodFile(dir, "default", "here")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("pod file: %v %v, want mode 0600", st, err)
	}
	if !locked(t, dir) {
		t.Error("the owner lock is not held while the cache runs")
	}
	pod("later", "node-a")
	polltest.Until(t, "the cache publishes a pod created after it started", func() bool { return read("later") != nil })
	live.Annotations["traffic.sidecar.istio.io/excludeOutboundPorts"] = "9000"
	if _, err := pods.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the cache rewrites a changed pod", func() bool {
		p := read("here")
		return p != nil && p.Metadata.Annotations["traffic.sidecar.istio.io/excludeOutboundPorts"] == "9000"
	})
	if err := pods.Delete(ctx, "later", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the cache removes a deleted pod", func() bool { return read("later") == nil })

	// A second install-cni (a rolling update) waits for the lock, leaving
	// the first's files alone, and takes over when the first stops.
	var logs logtest.Buffer
	c2, err := New(core, "node-a", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- c2.Publish(ctx2, dir) }()
	defer func() {
		cancel2()
		if err := <-done2; err != nil {
			t.Error(err)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 || entries[0].Name() != cni.PodCacheOwner || locked(t, dir) {
			t.Errorf("after the second stopped, the dir holds %v (%v), want only an unlocked %s", entries, err, cni.PodCacheOwner)
		}
	}()
	polltest.Until(t, "the second cache waits for the lock", func() bool { return strings.Contains(logs.String(), "waiting for it to stop") })
	if read("here") == nil {
		t.Error("the waiting cache removed the running one's files")
	}
	stop()
	polltest.Until(t, "the second cache takes over", func() bool { return read("here") != nil && locked(t, dir) })
}

// locked reports whether someone holds the cache dir's owner lock: a shared
// lock cannot be taken.
func locked(t *testing.T, dir string) bool {
	f, err := os.Open(filepath.Join(dir, cni.PodCacheOwner))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == syscall.EWOULDBLOCK
}
