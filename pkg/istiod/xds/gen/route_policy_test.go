package gen_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// policyMesh loads testdata/policy, the traffic policy mesh.
func policyMesh(t *testing.T) *model.PushContext {
	t.Helper()
	r := file.New(filepath.Join("testdata", "policy"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("policy mesh has problems: %v", p)
	}
	return model.BuildPushContext(r.Inputs(), "v1")
}

const echoTarget = "echo.policy.svc.cluster.local:7070"

var policyProxies = []proxyCase{
	// A sidecar in the services' namespace: every route, TCP and TLS
	// listener, ALLOW_ANY.
	{name: "policy-sidecar", id: "sidecar~127.0.1.9~client-0.policy~policy.svc.cluster.local"},
	// A sidecar under REGISTRY_ONLY whose Sidecar binds web to port 8080.
	{name: "policy-strict", id: "sidecar~127.0.2.9~client-0.strict~strict.svc.cluster.local"},
	// A proxyless gRPC client of echo.
	{name: "policy-grpc", id: "sidecar~127.0.1.8~client.policy~policy.svc.cluster.local",
		meta: map[string]any{"GENERATOR": "grpc"},
		names: map[string][]string{
			gen.ListenerType: {echoTarget},
			gen.RouteType:    {echoTarget},
			gen.ClusterType:  {"outbound|7070||echo.policy.svc.cluster.local"},
			gen.EndpointType: {"outbound|7070||echo.policy.svc.cluster.local"},
		}},
}

// TestPolicyGolden renders the policy mesh for each proxy, checks every
// resource with ValidateAll (through the Anys inside) and that every
// route configuration a listener names and every cluster a route or TCP
// proxy names exists, and compares their listeners and routes with
// testdata/<name>.golden.json.
func TestPolicyGolden(t *testing.T) {
	pc := policyMesh(t)
	for _, c := range policyProxies {
		t.Run(c.name, func(t *testing.T) {
			cfg := generateAll(t, pc, c)
			if err := xdstest.Check(cfg, gen.ClusterType, gen.RouteType, gen.EndpointType); err != nil {
				t.Error(err)
			}
			// Only listeners and routes are rendered: clusters and endpoints
			// have goldens of their own.
			got := renderJSON(t, xdstest.Config{gen.ListenerType: cfg[gen.ListenerType], gen.RouteType: cfg[gen.RouteType]})
			checkGolden(t, filepath.Join("testdata", c.name+".golden.json"), got, "PolicyGolden")
		})
	}
}
