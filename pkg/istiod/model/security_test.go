package model_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apisec "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pa is a PeerAuthentication created age seconds after epoch; selector
// is "k=v" or empty; ports maps a port to its mode.
func pa(ns, name string, age int, selector string, mode apisec.PeerAuthentication_MutualTLS_Mode, ports map[uint32]apisec.PeerAuthentication_MutualTLS_Mode) *security.PeerAuthentication {
	p := &security.PeerAuthentication{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))}}
	p.Spec.Mtls = &apisec.PeerAuthentication_MutualTLS{Mode: mode}
	if selector != "" {
		p.Spec.Selector = &apitype.WorkloadSelector{MatchLabels: labels(selector)}
	}
	for port, m := range ports {
		if p.Spec.PortLevelMtls == nil {
			p.Spec.PortLevelMtls = map[uint32]*apisec.PeerAuthentication_MutualTLS{}
		}
		p.Spec.PortLevelMtls[port] = &apisec.PeerAuthentication_MutualTLS{Mode: m}
	}
	return p
}

// labels parses one "k=v" pair.
func labels(s string) map[string]string {
	k, v, _ := strings.Cut(s, "=")
	return map[string]string{k: v}
}

const (
	unset      = apisec.PeerAuthentication_MutualTLS_UNSET
	strict     = apisec.PeerAuthentication_MutualTLS_STRICT
	permissive = apisec.PeerAuthentication_MutualTLS_PERMISSIVE
	disable    = apisec.PeerAuthentication_MutualTLS_DISABLE
)

// TestEffectiveMTLS checks Istio's inheritance: mesh, then namespace,
// then workload, UNSET inheriting, the oldest policy of a level winning,
// port-level modes over the workload's.
func TestEffectiveMTLS(t *testing.T) {
	app := model.Workload{Namespace: "shop", Labels: map[string]string{"app": "cart"}}
	tests := []struct {
		name     string
		policies []*security.PeerAuthentication
		w        model.Workload
		want     model.MTLSMode
		ports    map[uint32]model.MTLSMode
	}{
		{name: "nothing: PERMISSIVE", w: app, want: model.MTLSPermissive},
		{name: "mesh STRICT", w: app, want: model.MTLSStrict,
			policies: []*security.PeerAuthentication{pa(model.DefaultRootNamespace, "default", 0, "", strict, nil)}},
		{name: "mesh UNSET is PERMISSIVE", w: app, want: model.MTLSPermissive,
			policies: []*security.PeerAuthentication{pa(model.DefaultRootNamespace, "default", 0, "", unset, nil)}},
		{name: "namespace over mesh", w: app, want: model.MTLSDisable, policies: []*security.PeerAuthentication{
			pa(model.DefaultRootNamespace, "default", 0, "", strict, nil), pa("shop", "default", 0, "", disable, nil)}},
		{name: "other namespace does not apply", w: app, want: model.MTLSStrict, policies: []*security.PeerAuthentication{
			pa(model.DefaultRootNamespace, "default", 0, "", strict, nil), pa("other", "default", 0, "", disable, nil)}},
		{name: "workload over namespace", w: app, want: model.MTLSStrict, policies: []*security.PeerAuthentication{
			pa("shop", "default", 0, "", disable, nil), pa("shop", "cart", 0, "app=cart", strict, nil)}},
		{name: "workload selector not matching", w: app, want: model.MTLSDisable, policies: []*security.PeerAuthentication{
			pa("shop", "default", 0, "", disable, nil), pa("shop", "web", 0, "app=web", strict, nil)}},
		{name: "workload UNSET inherits the namespace", w: app, want: model.MTLSDisable, policies: []*security.PeerAuthentication{
			pa("shop", "default", 0, "", disable, nil), pa("shop", "cart", 0, "app=cart", unset, nil)}},
		{name: "oldest namespace policy wins", w: app, want: model.MTLSStrict, policies: []*security.PeerAuthentication{
			pa("shop", "b-newer", 5, "", disable, nil), pa("shop", "a-older", 1, "", strict, nil)}},
		{name: "root namespace selector applies only there", w: app, want: model.MTLSPermissive, policies: []*security.PeerAuthentication{
			pa(model.DefaultRootNamespace, "cart", 0, "app=cart", strict, nil)}},
		{name: "port level", w: app, want: model.MTLSStrict,
			ports: map[uint32]model.MTLSMode{8080: model.MTLSDisable, 9090: model.MTLSStrict},
			policies: []*security.PeerAuthentication{
				pa(model.DefaultRootNamespace, "default", 0, "", strict, nil),
				pa("shop", "cart", 0, "app=cart", unset, map[uint32]apisec.PeerAuthentication_MutualTLS_Mode{8080: disable, 9090: unset}),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := model.BuildPushContext(&model.Inputs{PeerAuthentications: tt.policies}, "1")
			got := pc.Security.EffectiveMTLS(tt.w)
			if got.Mode != tt.want {
				t.Errorf("mode: got %v, want %v", got.Mode, tt.want)
			}
			for port, want := range tt.ports {
				if m := got.ForPort(port); m != want {
					t.Errorf("port %d: got %v, want %v", port, m, want)
				}
			}
			if m := got.ForPort(1); m != tt.want {
				t.Errorf("port without a port-level mode: got %v, want %v", m, tt.want)
			}
		})
	}
}

func ap(ns, name, selector string, action apisec.AuthorizationPolicy_Action) *security.AuthorizationPolicy {
	p := &security.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.Action = action
	if selector != "" {
		p.Spec.Selector = &apitype.WorkloadSelector{MatchLabels: labels(selector)}
	}
	return p
}

// TestAuthorizationPoliciesFor checks selection (root namespace for all,
// own namespace, selectors, targetRefs never for sidecars) and grouping.
func TestAuthorizationPoliciesFor(t *testing.T) {
	withRef := ap("shop", "gateway-only", "", apisec.AuthorizationPolicy_DENY)
	withRef.Spec.TargetRefs = []*apitype.PolicyTargetReference{{Kind: "Gateway", Name: "gw"}}
	pc := model.BuildPushContext(&model.Inputs{AuthorizationPolicies: []*security.AuthorizationPolicy{
		ap(model.DefaultRootNamespace, "mesh-deny", "", apisec.AuthorizationPolicy_DENY),
		ap(model.DefaultRootNamespace, "mesh-cart-allow", "app=cart", apisec.AuthorizationPolicy_ALLOW),
		ap("shop", "ns-audit", "", apisec.AuthorizationPolicy_AUDIT),
		ap("shop", "cart-custom", "app=cart", apisec.AuthorizationPolicy_CUSTOM),
		ap("shop", "web-allow", "app=web", apisec.AuthorizationPolicy_ALLOW),
		ap("other", "other-deny", "", apisec.AuthorizationPolicy_DENY),
		withRef,
	}}, "1")
	got := pc.Security.AuthorizationPoliciesFor(model.Workload{Namespace: "shop", Labels: map[string]string{"app": "cart"}})
	names := func(ps []*security.AuthorizationPolicy) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	want := map[string][]string{
		"deny":   {model.DefaultRootNamespace + "/mesh-deny"},
		"allow":  {model.DefaultRootNamespace + "/mesh-cart-allow"},
		"audit":  {"shop/ns-audit"},
		"custom": {"shop/cart-custom"},
	}
	for action, ps := range map[string][]*security.AuthorizationPolicy{"deny": got.Deny, "allow": got.Allow, "audit": got.Audit, "custom": got.Custom} {
		if fmt.Sprint(names(ps)) != fmt.Sprint(want[action]) {
			t.Errorf("%s: got %v, want %v", action, names(ps), want[action])
		}
	}
}
