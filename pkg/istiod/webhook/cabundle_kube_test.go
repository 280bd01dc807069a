package webhook_test

import (
	"context"
	"net"
	"strings"
	"testing"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestPatcherMakesAdmissionWork: the webhook configurations as the chart
// installs them (no caBundle, validation Ignore) point at the real webhook
// server on loopback. The API server refuses pods in an injection
// namespace (it does not trust the server's certificate, and injection
// fails closed) and lets invalid config in; once the patcher runs with the
// real CA and the real dry-run readiness probe, pods are injected, the
// validation webhook fails closed and invalid config is refused.
func TestPatcherMakesAdmissionWork(t *testing.T) {
	env := kubetest.Start(t)
	installCRDs(t, env)
	ctx := kubetest.Context(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	authority, tlsCfg := servingTLS(t)
	icfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(icfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := webhook.New(webhook.Options{Injector: in, Validator: &validation.Validator{}, Log: testLog(t)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, l, tlsCfg) }()
	t.Cleanup(func() {
		stopServer()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	opts := webhook.ConfigurationOptions{URL: "https://" + l.Addr().String(), ValidationFailurePolicy: admissionregv1.Ignore}
	adm := env.Client.AdmissionregistrationV1()
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, webhook.MutatingConfiguration(opts), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vw, err := adm.ValidatingWebhookConfigurations().Create(ctx, webhook.ValidatingConfiguration(opts), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	injectNS := namespace(t, env.Client, "inj-", map[string]string{webhook.LabelInjection: "enabled"})
	cfgNS := namespace(t, env.Client, "cfg-", nil)
	createPod := func() (*corev1.Pod, error) {
		p, err := env.Client.CoreV1().Pods(injectNS).Create(ctx, appPod(netnstest.UniqueName("shop-"), nil), metav1.CreateOptions{})
		if err == nil {
			_ = env.Client.CoreV1().Pods(injectNS).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
		return p, err
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vsRes := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	createInvalidVS := func() error {
		vs := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
			"metadata": map[string]any{"name": netnstest.UniqueName("nohosts-")},
			"spec":     map[string]any{"http": []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "shop"}}}}}},
		}}
		_, err := dyn.Resource(vsRes).Namespace(cfgNS).Create(ctx, vs, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	// Before the patch: the API server calls the webhook and fails TLS.
	var lastErr error
	polltest.Until(t, "pods refused for the untrusted certificate", func() bool {
		_, lastErr = createPod()
		return lastErr != nil && strings.Contains(lastErr.Error(), "certificate signed by unknown authority")
	})
	t.Logf("before the patch, as on a real cluster: %v", lastErr)
	if err := createInvalidVS(); err != nil {
		t.Errorf("validation fails open before the patch, but the invalid VirtualService was refused: %v", err)
	}

	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.DryRunReady(ic.NetworkingV1().RESTClient(), "istio-system", "default")(ctx, vw); err == nil || !strings.Contains(err.Error(), "not refused") {
		t.Errorf("readiness while the webhook cannot be called: %v, want not ready", err)
	}
	log := &lines{}
	runPatcher(t, webhook.PatcherOptions{
		Client: env.Client.AdmissionregistrationV1().RESTClient(), Roots: authority, Log: testLogTee(t, log),
		Ready: webhook.DryRunReady(ic.NetworkingV1().RESTClient(), "istio-system", "default"),
	})

	polltest.Until(t, "pods injected after the patch", func() bool {
		p, err := createPod()
		lastErr = err
		return err == nil && p.Annotations["sidecar.istio.io/status"] != ""
	})
	polltest.Until(t, "validation failing closed", func() bool {
		got, err := adm.ValidatingWebhookConfigurations().Get(ctx, vw.Name, metav1.GetOptions{})
		return err == nil && *got.Webhooks[0].FailurePolicy == admissionregv1.Fail
	})
	if n := log.count("validation webhook ready"); n != 1 {
		t.Errorf("%d readiness lines, want 1", n)
	}
	if err := createInvalidVS(); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("invalid VirtualService after the patch: %v, want denied", err)
	}

	// Failing closed: with the webhook server gone, config is refused.
	stopServer()
	if err := <-served; err != nil {
		t.Error(err)
	}
	served <- nil
	polltest.Until(t, "config refused while the webhook is down", func() bool {
		err := createInvalidVS()
		return err != nil && strings.Contains(err.Error(), "failed calling webhook")
	})
}
