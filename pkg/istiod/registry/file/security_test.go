package file

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	apisec "istio.io/api/security/v1beta1"
)

const securityYAML = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata: {name: echo, namespace: shop}
spec:
  selector: {matchLabels: {app: echo}}
  mtls: {mode: PERMISSIVE}
  portLevelMtls: {"8080": {mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-b, namespace: shop}
spec:
  action: DENY
  rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/b]}}], to: [{operation: {paths: [/x]}}]}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec:
  jwtRules: [{issuer: https://issuer.example.com, jwksUri: https://issuer.example.com/jwks}]
`

// TestSecurityKinds reads the security.istio.io kinds (v1 and v1beta1)
// and refuses them under another group, and with unknown fields.
func TestSecurityKinds(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "security.yaml"), securityYAML)
	write(t, filepath.Join(dir, "bad.yaml"), `apiVersion: networking.istio.io/v1
kind: PeerAuthentication
metadata: {name: wrong-group}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: typo}
spec: {actoin: DENY}
`)
	r := New(dir, slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	in := r.Inputs()
	if len(in.PeerAuthentications) != 2 || len(in.AuthorizationPolicies) != 1 || len(in.RequestAuthentications) != 1 {
		t.Fatalf("got %d PeerAuthentications, %d AuthorizationPolicies, %d RequestAuthentications; want 2, 1, 1",
			len(in.PeerAuthentications), len(in.AuthorizationPolicies), len(in.RequestAuthentications))
	}
	pa := in.PeerAuthentications[1]
	if pa.Name != "echo" || pa.Spec.GetPortLevelMtls()[8080].GetMode() != apisec.PeerAuthentication_MutualTLS_DISABLE {
		t.Errorf("v1beta1 PeerAuthentication: got %s %v", pa.Name, pa.Spec.GetPortLevelMtls())
	}
	if ap := in.AuthorizationPolicies[0]; ap.Spec.GetAction() != apisec.AuthorizationPolicy_DENY ||
		ap.Spec.GetRules()[0].GetFrom()[0].GetSource().GetPrincipals()[0] != "cluster.local/ns/shop/sa/b" {
		t.Errorf("AuthorizationPolicy: got %v", ap.Spec.String())
	}
	if got := in.RequestAuthentications[0].Spec.GetJwtRules()[0].GetIssuer(); got != "https://issuer.example.com" {
		t.Errorf("RequestAuthentication issuer: got %q", got)
	}
	probs := r.Problems()
	if len(probs) != 2 {
		t.Fatalf("want 2 problems, got %v", probs)
	}
	for i, want := range []string{"PeerAuthentication default/wrong-group", `unknown field "actoin"`} {
		if !strings.Contains(probs[i].Error(), want) {
			t.Errorf("problem %d: %v; want it to mention %q", i, probs[i], want)
		}
	}
}
