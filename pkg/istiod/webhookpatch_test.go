package istiod_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestWebhookPatchFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    istiod.WebhookPatch
		wantErr string
	}{
		{"defaults", nil, istiod.WebhookPatch{Revision: "default", Namespace: "istio-system", Injection: true, Validation: true}, ""},
		{"the chart's environment", map[string]string{"REVISION": "canary", "POD_NAMESPACE": "mesh"},
			istiod.WebhookPatch{Revision: "canary", Namespace: "mesh", Injection: true, Validation: true}, ""},
		{"patching turned off", map[string]string{"INJECTION_WEBHOOK_CONFIG_NAME": "", "VALIDATION_WEBHOOK_CONFIG_NAME": ""},
			istiod.WebhookPatch{Revision: "default", Namespace: "istio-system"}, ""},
		{"names given", map[string]string{"INJECTION_WEBHOOK_CONFIG_NAME": "istio-sidecar-injector", "VALIDATION_WEBHOOK_CONFIG_NAME": "istio-istio-system"},
			istiod.WebhookPatch{Revision: "default", Namespace: "istio-system", Injection: true, Validation: true}, ""},
		{"bad revision", map[string]string{"REVISION": "a b"}, istiod.WebhookPatch{}, `REVISION="a b"`},
		{"bad namespace", map[string]string{"POD_NAMESPACE": "Mesh_1"}, istiod.WebhookPatch{}, `POD_NAMESPACE="Mesh_1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := istiod.WebhookPatchFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, "istio-system")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestStartWebhookPatcher: in Kubernetes mode istiod patches its
// configurations with its CA's root; in file mode it does not start.
func TestStartWebhookPatcher(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	caDir := t.TempDir()
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: caDir}, log)
	if err != nil {
		t.Fatal(err)
	}
	kctx := kubetest.Context(t)
	mw, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(kctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := istiod.WebhookPatch{Revision: "default", Namespace: "istio-system", Injection: true, Validation: true}
	if err := istiod.StartWebhookPatcher(ctx, istiod.Config{ConfigDir: t.TempDir()}, istiod.Webhooks{Addr: ":15017"}, p, authority, log); err != nil {
		t.Fatalf("file mode: %v", err)
	}
	if err := istiod.StartWebhookPatcher(ctx, istiod.Config{Kubeconfig: env.Kubeconfig}, istiod.Webhooks{Addr: ":15017"}, p, authority, log); err != nil {
		t.Fatal(err)
	}
	patchedWith := func(root []byte) func() bool {
		return func() bool {
			got, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(kctx, mw.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range got.Webhooks {
				if !bytes.Equal(w.ClientConfig.CABundle, root) {
					return false
				}
			}
			return true
		}
	}
	first := authority.RootCertPEM()
	polltest.Until(t, "caBundle is the CA root", patchedWith(first))

	// Rotation: the CA's directory gets another root and is reloaded.
	other := t.TempDir()
	if _, err := ca.New(ctx, ca.Config{SelfSignedDir: other}, log); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(other, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(caDir, f.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := authority.Reload(); err != nil {
		t.Fatal(err)
	}
	second := authority.RootCertPEM()
	if bytes.Equal(first, second) {
		t.Fatal("reload did not change the root")
	}
	polltest.Until(t, "caBundle is the rotated root", patchedWith(second))
}
