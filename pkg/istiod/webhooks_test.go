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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apinet "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/rest"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
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

	authority, addr := serveWebhooks(t, ctx, env, istiod.Webhooks{Namespace: ns, Revision: "canary"})
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

// warnings records the Warning headers the API server sends a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// startValidation serves istiod's webhooks in Kubernetes mode, registers
// the validating webhook with the API server and waits until it refuses
// an invalid VirtualService. It returns an Istio client whose warnings are
// recorded, and a namespace to create objects in.
func startValidation(t *testing.T, deny bool) (*kubetest.Env, context.Context, istioclient.Interface, *warnings, string) {
	env, ctx := crdtest.Start(t)
	authority, addr := serveWebhooks(t, ctx, env, istiod.Webhooks{DenyMissingHosts: deny})
	_, port, _ := net.SplitHostPort(addr)
	opts := webhook.ConfigurationOptions{URL: "https://localhost:" + port, CABundle: authority.RootCertPEM()}
	if _, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook.ValidatingConfiguration(opts), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("shop-%d", time.Now().UnixNano())
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := rest.CopyConfig(env.Config)
	rec := &warnings{}
	rc.WarningHandler = rec
	ic, err := istioclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	polltest.Until(t, "the validating webhook refusing a VirtualService without hosts", func() bool {
		n++
		vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n), Namespace: ns}}
		_, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, vs, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "at least one host required")
	})
	rec.take()
	return env, ctx, ic, rec, ns
}

// routeTo is a VirtualService for host name that routes to host.
func routeTo(ns, name, host string) *networkingv1.VirtualService {
	return &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: apinet.VirtualService{Hosts: []string{name}, Http: []*apinet.HTTPRoute{{
			Route: []*apinet.HTTPRouteDestination{{Destination: &apinet.Destination{Host: host}}}}}}}
}

// TestValidationWarnsOfMissingHost creates a VirtualService to a host that
// does not exist through a real API server: it is admitted, and the client
// gets the analysis message as a Warning header. Once the Service exists,
// the same route comes with no warning.
func TestValidationWarnsOfMissingHost(t *testing.T) {
	env, ctx, ic, rec, ns := startValidation(t, false)
	if _, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, routeTo(ns, "reviews", "ratings"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a route to a missing host must be admitted by default: %v", err)
	}
	want := []string{`IST0101 spec.http[0].route[0].destination.host: Referenced host not found: "ratings"`}
	if got := rec.take(); !cmp.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ratings", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	polltest.Until(t, "a route to the new Service admitted without warnings", func() bool {
		n++
		if _, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, routeTo(ns, fmt.Sprintf("again-%d", n), "ratings"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := rec.take()
		if len(got) > 0 {
			t.Logf("warnings: %q", got)
		}
		return len(got) == 0
	})

	// A field istiod does not translate: admitted, with a warning per
	// proxy type (none is running here: proxyless is assumed).
	dr := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "ratings", Namespace: ns},
		Spec: apinet.DestinationRule{Host: "ratings", TrafficPolicy: &apinet.TrafficPolicy{
			LoadBalancer: &apinet.LoadBalancerSettings{LocalityLbSetting: &apinet.LocalityLoadBalancerSetting{}}}}}
	if _, err := ic.NetworkingV1().DestinationRules(ns).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"SKF0001: spec.trafficPolicy.loadBalancer.localityLbSetting is not translated for proxyless gRPC (grpc-go) (assumed: no workload known): " +
		"endpoints are balanced without locality preference or failover"}
	if got := rec.take(); !cmp.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
}

// TestValidationDeniesMissingHost is the opt-in: with DenyMissingHosts the
// same VirtualService is refused, and admitted once its Service exists.
func TestValidationDeniesMissingHost(t *testing.T) {
	env, ctx, ic, _, ns := startValidation(t, true)
	_, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, routeTo(ns, "reviews", "ratings"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `spec.http[0].route[0].destination.host: Referenced host not found: "ratings"`) {
		t.Fatalf("got %v, want a refusal naming the field and the host", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ratings", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the route admitted once its Service exists", func() bool {
		_, err := ic.NetworkingV1().VirtualServices(ns).Create(ctx, routeTo(ns, "reviews", "ratings"), metav1.CreateOptions{})
		return err == nil
	})
}

// serveWebhooks serves istiod's webhooks (w, on a free loopback port, with
// no mounted injector files: the API server is the source) in Kubernetes
// mode against env until the test ends, with a CA whose serving
// certificate is for localhost, as the API server calls them at
// https://localhost:PORT. It returns the CA and the address.
func serveWebhooks(t *testing.T, ctx context.Context, env *kubetest.Env, w istiod.Webhooks) (*ca.CA, string) {
	t.Helper()
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir(), ServingDNSNames: []string{"localhost"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.Addr = l.Addr().String()
	l.Close()
	dir := t.TempDir()
	w.InjectConfig, w.InjectValues = filepath.Join(dir, "config"), filepath.Join(dir, "values")
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
	return authority, w.Addr
}
