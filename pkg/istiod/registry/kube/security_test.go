package kube_test

import (
	"context"
	"log/slog"
	"testing"

	apisec "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestKubeSecurityKinds reads PeerAuthentication, AuthorizationPolicy and
// RequestAuthentication from a real API server, sees an update, and the
// push context's ConfigHash changes with them.
func TestKubeSecurityKinds(t *testing.T) {
	env, ctx := crdtest.Start(t)
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: model.DefaultRootNamespace}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sv := ic.SecurityV1()
	pa := &security.PeerAuthentication{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: model.DefaultRootNamespace},
		Spec:       apisec.PeerAuthentication{Mtls: &apisec.PeerAuthentication_MutualTLS{Mode: apisec.PeerAuthentication_MutualTLS_STRICT}},
	}
	if _, err := sv.PeerAuthentications(model.DefaultRootNamespace).Create(ctx, pa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ap := &security.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-b", Namespace: "default"},
		Spec: apisec.AuthorizationPolicy{
			Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "echo"}},
			Action:   apisec.AuthorizationPolicy_DENY,
			Rules:    []*apisec.Rule{{From: []*apisec.Rule_From{{Source: &apisec.Source{Principals: []string{"cluster.local/ns/default/sa/b"}}}}}},
		},
	}
	if _, err := sv.AuthorizationPolicies("default").Create(ctx, ap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ra := &security.RequestAuthentication{
		ObjectMeta: metav1.ObjectMeta{Name: "jwt", Namespace: "default"},
		Spec:       apisec.RequestAuthentication{JwtRules: []*apisec.JWTRule{{Issuer: "https://issuer.example.com", JwksUri: "https://issuer.example.com/jwks"}}},
	}
	if _, err := sv.RequestAuthentications("default").Create(ctx, ra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r, err := kube.New(kube.Config{Rest: env.Config}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx, func() {}) }()
	defer func() { cancel(); <-done }()

	polltest.Until(t, "sync", func() bool { return r.Synced() })
	in := r.Inputs()
	if len(in.PeerAuthentications) != 1 || len(in.AuthorizationPolicies) != 1 || len(in.RequestAuthentications) != 1 {
		t.Fatalf("inputs: %d PeerAuthentications, %d AuthorizationPolicies, %d RequestAuthentications; want 1 each",
			len(in.PeerAuthentications), len(in.AuthorizationPolicies), len(in.RequestAuthentications))
	}
	pc := model.BuildPushContext(in, "1")
	w := model.Workload{Namespace: "default", Labels: map[string]string{"app": "echo"}}
	if got := pc.Security.EffectiveMTLS(w).Mode; got != model.MTLSStrict {
		t.Errorf("mesh-wide STRICT: got %v", got)
	}
	if got := pc.Security.AuthorizationPoliciesFor(w); len(got.Deny) != 1 {
		t.Errorf("DENY policies for app=echo: got %+v", got)
	}

	// Switching the mesh to PERMISSIVE arrives through the informer and
	// changes the config hash.
	pa, err = sv.PeerAuthentications(model.DefaultRootNamespace).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.Spec.Mtls.Mode = apisec.PeerAuthentication_MutualTLS_PERMISSIVE
	if _, err := sv.PeerAuthentications(model.DefaultRootNamespace).Update(ctx, pa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "PERMISSIVE seen", func() bool {
		pc2 := model.BuildPushContext(r.Inputs(), "2")
		return pc2.Security.EffectiveMTLS(w).Mode == model.MTLSPermissive && pc2.Diff(pc).Full
	})
}
