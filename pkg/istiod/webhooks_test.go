package istiod_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestWebhooksFollowInjectorConfigMap runs istiod's webhooks in Kubernetes
// mode against a real kube-apiserver and edits the injector's ConfigMap:
// the next admission uses the new configuration, with no mounted file.
func TestWebhooksFollowInjectorConfigMap(t *testing.T) {
	env, ctx := crdtest.Start(t)
	const ns = "skiff-injector"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector-canary", Namespace: ns}, Data: map[string]string{
		inject.ConfigKey: "injectedAnnotations: {example.com/generation: first}\n",
		inject.ValuesKey: `{"revision": "canary"}`,
	}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The API server calls the webhooks at https://localhost:PORT.
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir(), ServingDNSNames: []string{"localhost"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir() // no mounted ConfigMap files: the API server is the source
	w := istiod.Webhooks{Addr: addr, InjectConfig: filepath.Join(dir, "config"), InjectValues: filepath.Join(dir, "values"), Namespace: ns, Revision: "canary"}
	wctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stopped, err := istiod.ServeWebhooks(wctx, istiod.Config{Kubeconfig: env.Kubeconfig}, w, authority, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	// Runs before the API server stops, so no informer is left retrying.
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: "localhost", RootCAs: authority.Roots().Pool()}}}
	t.Cleanup(client.CloseIdleConnections)
	// generation returns the example.com/generation annotation the
	// injector adds to a pod, or "" while the webhooks are not serving.
	generation := func() string {
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
		raw, _ := json.Marshal(pod)
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "shop",
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}},
		}
		body, _ := json.Marshal(review)
		resp, err := client.Post(fmt.Sprintf("https://%s/inject", addr), "application/json", bytes.NewReader(body))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(b, &out); err != nil || out.Response == nil || !out.Response.Allowed {
			t.Fatalf("admission: %s", b)
		}
		var ops []struct {
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal(out.Response.Patch, &ops); err != nil {
			t.Fatalf("patch: %v", err)
		}
		for _, op := range ops {
			switch v := op.Value.(type) {
			case map[string]any: // the whole annotations map
				if g, ok := v["example.com/generation"].(string); ok {
					return g
				}
			case string:
				if op.Path == "/metadata/annotations/example.com~1generation" {
					return v
				}
			}
		}
		t.Fatalf("patch without example.com/generation: %s", out.Response.Patch)
		return ""
	}
	polltest.Until(t, "webhooks serving the ConfigMap's first configuration", func() bool { return generation() == "first" })

	cm.Data[inject.ConfigKey] = "injectedAnnotations: {example.com/generation: second}\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "webhooks serving the edited configuration", func() bool { return generation() == "second" })

	// Through the API server: a grpc-agent pod is admitted as the template
	// shapes it (the API server validates the result).
	_, port, _ := net.SplitHostPort(addr)
	opts := webhook.ConfigurationOptions{URL: "https://localhost:" + port, CABundle: authority.RootCertPEM(), Revision: "canary"}
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook.MutatingConfiguration(opts), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const app = "grpc-app"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app,
		Labels: map[string]string{"istio.io/rev": "canary"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	n := 0
	// The API server picks the webhook configuration up asynchronously.
	polltest.Until(t, "a pod admitted with the grpc-agent template", func() bool {
		n++
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("grpc-%d", n), Namespace: app,
			Annotations: map[string]string{"inject.istio.io/templates": "grpc-agent"}},
			// The harness runs without the ServiceAccount admission plugin, which
			// in a cluster sets this (the projected token volume needs it).
			Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
		p, err := env.Client.CoreV1().Pods(app).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod: %v", err)
		}
		got = p
		return len(p.Spec.Containers) == 2
	})
	if got.Spec.Containers[0].Name != "app" || got.Spec.Containers[1].Name != "istio-proxy" {
		t.Fatalf("containers %v", got.Spec.Containers)
	}
	env0 := map[string]string{}
	for _, e := range got.Spec.Containers[0].Env {
		env0[e.Name] = e.Value
	}
	if env0["GRPC_XDS_BOOTSTRAP"] != "/etc/istio/proxy/grpc-bootstrap.json" {
		t.Errorf("app env %v", got.Spec.Containers[0].Env)
	}
	if got.Annotations["example.com/generation"] != "second" || len(got.Spec.InitContainers) != 0 {
		t.Errorf("annotations %v, init containers %d", got.Annotations, len(got.Spec.InitContainers))
	}
}
