package gen

import (
	"log/slog"
	"path/filepath"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

// TestCatchAllVirtualHost: the catch-all virtual host follows the scope's
// outbound traffic policy (strict: a Sidecar with REGISTRY_ONLY).
func TestCatchAllVirtualHost(t *testing.T) {
	r := file.New(filepath.Join("testdata", "policy"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	pc := model.BuildPushContext(r.Inputs(), "v1")
	for _, c := range []struct {
		id, wantName string
		check        func(*routev3.Route) bool
	}{
		{"sidecar~127.0.1.9~client-0.policy~policy.svc.cluster.local", "allow_any", func(r *routev3.Route) bool {
			a := r.GetRoute()
			return a.GetCluster() == PassthroughCluster && a.GetTimeout() != nil && a.GetTimeout().AsDuration() == 0
		}},
		{"sidecar~127.0.2.9~client-0.strict~strict.svc.cluster.local", "block_all", func(r *routev3.Route) bool {
			return r.GetDirectResponse().GetStatus() == 502
		}},
	} {
		meta, _ := structpb.NewStruct(nil)
		p, err := model.ParseProxy(c.id, meta)
		if err != nil {
			t.Fatal(err)
		}
		vh := catchAllVirtualHost(pc.ScopeFor(p), pc.Mesh)
		if err := vh.ValidateAll(); err != nil {
			t.Errorf("%s: %v", c.id, err)
		}
		if vh.GetName() != c.wantName || len(vh.GetRoutes()) != 1 || !c.check(vh.GetRoutes()[0]) {
			t.Errorf("%s: got %v, want %s", c.id, vh, c.wantName)
		}
	}
}
