package gen

import (
	"errors"
	"testing"

	security "istio.io/client-go/pkg/apis/security/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

// peerAuthn parses PeerAuthentication YAML into a push's security policies.
func peerAuthn(t *testing.T, yaml string) *model.SecurityPolicies {
	t.Helper()
	objs, errs := file.Parse("pa.yaml", []byte(yaml))
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	in := &model.Inputs{}
	for _, o := range objs {
		in.PeerAuthentications = append(in.PeerAuthentications, o.(*security.PeerAuthentication))
	}
	return model.BuildPushContext(in, "v1").Security
}

// TestAutoMTLSFollowsNamespaceMode: auto mTLS is on unless the service's
// namespace (or the mesh, when the namespace sets no mode) disables
// mutual TLS; a rule's explicit TLS is used whatever the mode.
func TestAutoMTLSFollowsNamespaceMode(t *testing.T) {
	svc := &model.Service{Hostname: "echo.default.svc.cluster.local", Namespace: "default"}
	port := model.Port{Name: "http", Port: 8080, Protocol: model.ProtocolHTTP}
	eps := []model.Endpoint{{Address: "127.0.0.71", Port: 8080, ServicePort: 8080, Healthy: true, Weight: 1,
		Labels: map[string]string{TLSModeLabel: "istio"}, ServiceAccount: "echo"}}
	pa := func(ns, mode string) string {
		return "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: p-" + ns + ", namespace: " + ns + "}\nspec: {mtls: {mode: " + mode + "}}\n"
	}
	for _, tc := range []struct {
		name, yaml string
		auto       bool
	}{
		{"no policy", "", true},
		{"namespace STRICT", pa("default", "STRICT"), true},
		{"namespace DISABLE", pa("default", "DISABLE"), false},
		{"mesh DISABLE", pa(model.DefaultRootNamespace, "DISABLE"), false},
		{"mesh DISABLE, namespace PERMISSIVE", pa(model.DefaultRootNamespace, "DISABLE") + "---\n" + pa("default", "PERMISSIVE"), true},
		{"other namespace DISABLE", pa("shop", "DISABLE"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sec *model.SecurityPolicies
			if tc.yaml != "" {
				sec = peerAuthn(t, tc.yaml)
			}
			c := outboundClustersIn(sec, svc, port, nil, eps, false)[0]
			if got := len(c.GetTransportSocketMatches()) == 2; got != tc.auto {
				t.Errorf("auto mTLS = %v, want %v (%v)", got, tc.auto, c)
			}
		})
	}
}
