package crdtest

import (
	"context"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// Start runs a real kube-apiserver for the test with the CRDs installed
// and returns it with a context that ends with the test. Without the
// binaries (`make k8s-assets`, which `make test` runs first) it skips.
func Start(t *testing.T) (*kubetest.Env, context.Context) {
	t.Helper()
	if _, err := kubetest.AssetsDir(); err != nil {
		t.Skip(err)
	}
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if err := InstallCRDs(ctx, env.Config); err != nil {
		t.Fatal(err)
	}
	return env, ctx
}
