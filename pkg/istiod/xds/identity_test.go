package xds_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestNodeMustMatchIdentity: on the TLS port a proxy's stream is served only
// for a node of the namespace and service account its token proves, as
// Istio's PILOT_ENABLE_XDS_IDENTITY_CHECK (on by default) has it; a
// workload cannot claim another namespace's node to read its config.
func TestNodeMustMatchIdentity(t *testing.T) {
	d := newDebugEnv(t)
	node := func(ns, sa string) *corev3.Node {
		meta, _ := structpb.NewStruct(map[string]any{"SERVICE_ACCOUNT": sa})
		return &corev3.Node{Id: "sidecar~10.1.2.3~app-1." + ns + "~" + ns + ".svc.cluster.local", Metadata: meta}
	}
	const cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	for _, tc := range []struct {
		name   string
		node   *corev3.Node
		refuse bool
	}{
		{"its own namespace and account", node("shop", "cart"), false},
		{"another namespace", node("bank", "cart"), true},
		{"another service account", node("shop", "admin"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ask(t, d.tlsAddr, d.tlsDial(d.token(t, "shop", "cart")), tc.node, cds)
			switch {
			case tc.refuse && status.Code(err) != codes.PermissionDenied:
				t.Errorf("stream for %s with a token of shop/cart: %v (%d resources), want PermissionDenied", tc.node.GetId(), err, len(r.GetResources()))
			case !tc.refuse && err != nil:
				t.Errorf("stream for %s with a token of shop/cart: %v", tc.node.GetId(), err)
			}
		})
	}
}
