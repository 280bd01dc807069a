package routes_test

import (
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
)

// TestEnvoyOnlyFieldsLeftOut: a route with policy grpc-go does not
// implement (header operations, rewrite, mirrors, CORS) still serves
// proxyless clients: those fields are left out of their routes (and
// reported by analysis), and a redirect route, which grpc-go cannot
// follow, is left out so the next route answers.
func TestEnvoyOnlyFieldsLeftOut(t *testing.T) {
	m, a, _ := echoMesh(t, "envoy-only", `  - name: moved
    match: [{headers: {x-old: {exact: "yes"}}}]
    redirect: {uri: /elsewhere}
  - name: decorated
    headers: {request: {set: {x-env: prod}}, response: {remove: [server]}}
    rewrite: {authority: other.example.com}
    mirror: {host: echo, subset: v1}
    corsPolicy: {allowOrigins: [{exact: "https://a.example.com"}]}
    route: [{destination: {host: echo, subset: v2}}]`)
	cl := dial(t, m, "envoy-only")
	for _, md := range [][]string{nil, {"x-old", "yes"}} {
		name, err := proxylesstest.Call(t.Context(), cl, md...)
		if err != nil || name != "b" {
			t.Fatalf("call with %v: %q, %v; want b", md, name, err)
		}
	}
	if n := a.Calls.Load(); n != 0 {
		t.Errorf("the mirror (a) got %d calls; gRPC clients do not mirror", n)
	}
}
