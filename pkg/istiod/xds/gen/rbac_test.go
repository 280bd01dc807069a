package gen

import (
	"slices"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	"google.golang.org/protobuf/encoding/protojson"
	apisec "istio.io/api/security/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

func policy(t *testing.T, name, spec string) *security.AuthorizationPolicy {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	p := &security.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if err := protojson.Unmarshal(js, &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRBACPolicies checks what each action keeps of a rule it cannot
// fully render: ALLOW drops the rule (allowing less), DENY drops the
// condition (denying more), as Istio does; an empty ALLOW policy matches
// nothing; an unknown "when" key drops the rule whatever the action.
func TestRBACPolicies(t *testing.T) {
	tests := []struct {
		name   string
		flavor rbacFlavor
		spec   string
		want   []string // policy names, sorted
	}{
		{"ALLOW with paths on TCP: rule dropped", envoyTCP,
			`{action: ALLOW, rules: [{to: [{operation: {paths: [/a]}}]}, {from: [{source: {namespaces: [x]}}]}]}`,
			[]string{"ns[ns]-policy[p]-rule[1]"}},
		{"DENY with paths on TCP: condition dropped", envoyTCP,
			`{action: DENY, rules: [{to: [{operation: {paths: [/a]}}]}]}`,
			[]string{"ns[ns]-policy[p]-rule[0]"}},
		{"ALLOW with paths on HTTP", envoyHTTP,
			`{action: ALLOW, rules: [{to: [{operation: {paths: [/a]}}]}]}`,
			[]string{"ns[ns]-policy[p]-rule[0]"}},
		{"ALLOW without rules matches nothing", envoyHTTP, `{action: ALLOW}`, []string{"ns[ns]-policy[p]-rule[0]"}},
		{"unknown when key", envoyHTTP,
			`{action: DENY, rules: [{when: [{key: bogus.key, values: [x]}]}, {}]}`,
			[]string{"ns[ns]-policy[p]-rule[1]"}},
		{"proxyless names", grpcHTTP, `{action: DENY, rules: [{}, {}]}`, []string{"ns-p-0", "ns-p-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(t, "p", tt.spec)
			set := buildRBAC(tt.flavor, rbacAction(p.Spec.GetAction()), []*security.AuthorizationPolicy{p}, "")
			var got []string
			for k := range set.rules.GetPolicies() {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("policies: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRBACFilterOrder checks Istio's order (CUSTOM as DENY, AUDIT, DENY,
// ALLOW) and that proxyless servers get DENY and ALLOW only, in one DENY
// filter of a distinct name.
func TestRBACFilterOrder(t *testing.T) {
	ps := model.AuthorizationPolicies{
		Custom: []*security.AuthorizationPolicy{policy(t, "c", `{action: CUSTOM, provider: {name: ext}, rules: [{}]}`)},
		Audit:  []*security.AuthorizationPolicy{policy(t, "a", `{action: AUDIT, rules: [{}]}`)},
		Deny:   []*security.AuthorizationPolicy{policy(t, "d", `{action: DENY, rules: [{}]}`)},
		Allow:  []*security.AuthorizationPolicy{policy(t, "l", `{action: ALLOW, rules: [{}]}`)},
	}
	names := func(f rbacFlavor) []string {
		var out []string
		for _, h := range rbacHTTPFilters(f, ps) {
			out = append(out, h.GetName())
		}
		return out
	}
	if got, want := names(envoyHTTP), []string{rbacHTTPFilter, rbacHTTPFilter, rbacHTTPFilter, rbacHTTPFilter}; !slices.Equal(got, want) {
		t.Errorf("Envoy filters: got %v, want %v", got, want)
	}
	if got, want := names(grpcHTTP), []string{rbacHTTPFilterDeny, rbacHTTPFilter}; !slices.Equal(got, want) {
		t.Errorf("proxyless filters: got %v, want %v", got, want)
	}
	sets := authzSets(envoyHTTP, ps)
	var actions []string
	for _, s := range sets {
		actions = append(actions, s.rules.GetAction().String())
	}
	if want := []string{"DENY", "LOG", "DENY", "ALLOW"}; !slices.Equal(actions, want) {
		t.Errorf("actions: got %v, want %v", actions, want)
	}
}

func rbacAction(a apisec.AuthorizationPolicy_Action) rbacv3.RBAC_Action {
	switch a {
	case apisec.AuthorizationPolicy_DENY:
		return rbacv3.RBAC_DENY
	case apisec.AuthorizationPolicy_AUDIT:
		return rbacv3.RBAC_LOG
	}
	return rbacv3.RBAC_ALLOW
}

func TestClaimPath(t *testing.T) {
	for in, want := range map[string][]string{"[iss]": {"iss"}, "[a][b]": {"a", "b"}, "": nil, "[a": nil, "a]": nil, "[]": nil, "[a]x": nil} {
		got, err := claimPath(in)
		if want == nil {
			if err == nil {
				t.Errorf("claimPath(%q) = %v, want an error", in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("claimPath(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
