package cluster_test

import (
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// TestToken gets the token Istio's istioctl presents to istiod (SA default
// of istio-system, audience istio-ca) from a real API server, and has the
// API server review it for that audience, as istiod does.
func TestToken(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	ns := "tok-istio-system"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	clients, err := kuberest.New(env.Config, true)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster.Cluster{Config: env.Config, Clients: clients, Namespace: "default"}
	if _, err := cl.Token(ctx, ns, "default", []string{cluster.IstioCAAudience}, time.Hour); err == nil {
		t.Fatal("a token for a service account that does not exist")
	}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cl.Token(ctx, ns, "default", []string{cluster.IstioCAAudience}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := env.Client.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tok, Audiences: []string{"istio-ca"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":default"; !tr.Status.Authenticated || tr.Status.User.Username != want {
		t.Fatalf("review: authenticated %v as %q, want %q (%s)", tr.Status.Authenticated, tr.Status.User.Username, want, tr.Status.Error)
	}
}
