package configmap

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/istiochart"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestWatchTakesIstiosConfigMap puts the istio-sidecar-injector ConfigMap
// Istio 1.31's chart renders, unchanged, on a real API server and waits
// for the injector to apply it (Istio's templates use Sprig and Istio's
// own functions) and inject with Istio's sidecar template.
func TestWatchTakesIstiosConfigMap(t *testing.T) {
	inst := istiochart.MustRender(t, map[string]any{})
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	const ns = "istio-system"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := inst.InjectorConfigMap()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	def, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := make(chan slog.Record, 100)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	synced := make(chan struct{})
	go func() {
		done <- Watch(wctx, env.Client.CoreV1().RESTClient(), ns, inject.ConfigMapName, in, slog.New(recorder(logs)), synced)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-synced:
	case <-time.After(polltest.Timeout):
		t.Fatal("watch never synced")
	}
	select {
	case r := <-logs:
		t.Fatalf("Istio's ConfigMap not applied: %s %v", r.Message, attrs(r))
	default:
	}
	// Istio's templates are the ones in use: Skiff's chart has no waypoint.
	polltest.Until(t, "Istio's templates applied", func() bool {
		_, ok := in.Config().Templates["waypoint"]
		return ok
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "shop"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hello", Image: "hello:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}}}
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatalf("inject with Istio's templates: %v", err)
	}
	if !res.Injected {
		t.Fatalf("not injected: %s", res.Reason)
	}
	var proxy *corev1.Container
	for i, c := range res.Pod.Spec.Containers {
		if c.Name == "istio-proxy" {
			proxy = &res.Pod.Spec.Containers[i]
		}
	}
	if proxy == nil {
		t.Fatalf("no istio-proxy container: %v", names(res.Pod))
	}
	if got := proxy.Image; got != "registry.istio.io/testing/proxyv2:latest" {
		t.Errorf("istio-proxy image %q, want Istio's chart's", got)
	}
	if got := res.Pod.Annotations["sidecar.istio.io/status"]; got == "" {
		t.Error("no sidecar.istio.io/status")
	}
}

func attrs(r slog.Record) map[string]string {
	out := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value.String(); return true })
	return out
}

func names(p *corev1.Pod) string {
	var n []string
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		n = append(n, c.Name)
	}
	b, _ := json.Marshal(n)
	return string(b)
}
