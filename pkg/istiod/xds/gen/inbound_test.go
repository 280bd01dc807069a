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

// securityMesh loads testdata/security: one workload under
// PeerAuthentication (with port-level modes), AuthorizationPolicies of
// every action and a RequestAuthentication.
func securityMesh(t *testing.T) *model.PushContext {
	t.Helper()
	r := file.New(filepath.Join("testdata", "security"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("security mesh has problems: %v", p)
	}
	return model.BuildPushContext(r.Inputs(), "v1")
}

var securityProxies = []proxyCase{
	// The workload's Envoy sidecar: virtualInbound with its chains.
	{name: "security-sidecar", id: "sidecar~127.0.3.10~app-0.sec~sec.svc.cluster.local"},
	// The same workload as a proxyless gRPC server on its STRICT and DISABLE ports.
	{name: "security-grpc-server", id: "sidecar~127.0.3.10~app-0.sec~sec.svc.cluster.local",
		meta: map[string]any{"GENERATOR": "grpc"},
		names: map[string][]string{
			gen.ListenerType: {gen.GRPCInboundPrefix + "127.0.3.10:8080", gen.GRPCInboundPrefix + "127.0.3.10:9090"},
			gen.RouteType:    {},
			gen.ClusterType:  {},
			gen.EndpointType: {},
		}},
}

// TestSecurityGolden renders the security mesh, validates every resource
// through the Anys inside (ValidateAll), checks references and compares
// with testdata/<name>.golden.json.
func TestSecurityGolden(t *testing.T) {
	pc := securityMesh(t)
	for _, c := range securityProxies {
		t.Run(c.name, func(t *testing.T) {
			cfg := generateAll(t, pc, c)
			if err := xdstest.Check(cfg, gen.ClusterType, gen.RouteType, gen.EndpointType); err != nil {
				t.Error(err)
			}
			got := renderJSON(t, cfg)
			checkGolden(t, filepath.Join("testdata", c.name+".golden.json"), got, "SecurityGolden")
		})
	}
}
