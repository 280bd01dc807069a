package gen

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	security "istio.io/client-go/pkg/apis/security/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// The RBAC filters' names. Envoy takes one name several times; grpc-go
// refuses a name twice, so proxyless servers get Istio's ".DENY" suffix.
const (
	rbacHTTPFilter     = "envoy.filters.http.rbac"
	rbacHTTPFilterDeny = "envoy.filters.http.rbac.DENY"
	rbacNetworkFilter  = "envoy.filters.network.rbac"
	// rbacTCPStatPrefix is Istio's stat prefix of network RBAC filters.
	rbacTCPStatPrefix = "tcp."
	// dryRunAnnotation marks a policy that is evaluated but not enforced.
	dryRunAnnotation = "istio.io/dry-run"
	// badCustomSuffix names the DENY rules a CUSTOM policy becomes when
	// its extension provider is not defined (Skiff defines none).
	badCustomSuffix = "-deny-due-to-bad-CUSTOM-action"
)

// rbacFlavor is who evaluates the rules.
type rbacFlavor int

const (
	envoyHTTP rbacFlavor = iota // HTTP filter of an Envoy sidecar
	envoyTCP                    // network filter of an Envoy sidecar
	grpcHTTP                    // HTTP filter of a grpc-go xDS server
)

// policyName names one rule's RBAC policy as Istio does for the flavor.
func policyName(f rbacFlavor, p *security.AuthorizationPolicy, i int) string {
	if f == grpcHTTP {
		return fmt.Sprintf("%s-%s-%d", p.Namespace, p.Name, i)
	}
	return fmt.Sprintf("ns[%s]-policy[%s]-rule[%d]", p.Namespace, p.Name, i)
}

// matchNever is the policy of an AuthorizationPolicy without rules.
func matchNever() *rbacv3.Policy {
	return &rbacv3.Policy{
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_NotRule{NotRule: &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_NotId{NotId: &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}}}},
	}
}

// rbacSet is the rules of one action: enforced, and dry-run (shadow).
type rbacSet struct {
	rules, shadow *rbacv3.RBAC
}

// buildRBAC renders the policies of one action. A rule that cannot be
// rendered is reported: an ALLOW rule is dropped, a DENY or AUDIT rule
// loses only the condition it cannot check.
func buildRBAC(f rbacFlavor, action rbacv3.RBAC_Action, policies []*security.AuthorizationPolicy, suffix string) rbacSet {
	var out rbacSet
	tcp := f == envoyTCP
	for _, p := range policies {
		dry := p.Annotations[dryRunAnnotation] == "true"
		if dry && f == grpcHTTP {
			reportOnce("AuthorizationPolicy in dry-run is not evaluated by proxyless gRPC servers", "policy", p.Namespace+"/"+p.Name)
			continue
		}
		set := &out.rules
		if dry {
			set = &out.shadow
		}
		if *set == nil {
			*set = &rbacv3.RBAC{Action: action, Policies: map[string]*rbacv3.Policy{}}
		}
		if len(p.Spec.GetRules()) == 0 {
			(*set).Policies[policyName(f, p, 0)+suffix] = matchNever()
			continue
		}
		for i, r := range p.Spec.GetRules() {
			name := policyName(f, p, i) + suffix
			pol, err := buildRule(r, p.Namespace, tcp, action == rbacv3.RBAC_ALLOW)
			if err != nil {
				if !tcp {
					reportOnce("AuthorizationPolicy rule skipped", "policy", p.Namespace+"/"+p.Name, "rule", i, "err", err)
				}
				continue
			}
			(*set).Policies[name] = pol
		}
	}
	return out
}

// authzSets are a workload's rules in Istio's evaluation order: CUSTOM
// (as DENY, no provider), AUDIT, DENY, ALLOW. grpc-go evaluates only DENY
// and ALLOW; AUDIT is skipped for it.
func authzSets(f rbacFlavor, ps model.AuthorizationPolicies) []rbacSet {
	var out []rbacSet
	if len(ps.Custom) > 0 {
		for _, p := range ps.Custom {
			reportOnce("CUSTOM AuthorizationPolicy is not supported (no extension providers): its rules deny instead",
				"policy", p.Namespace+"/"+p.Name, "provider", p.Spec.GetProvider().GetName())
		}
		out = append(out, buildRBAC(f, rbacv3.RBAC_DENY, ps.Custom, badCustomSuffix))
	}
	if len(ps.Audit) > 0 {
		if f == grpcHTTP {
			reportOnce("AUDIT AuthorizationPolicy is not evaluated by proxyless gRPC servers", "policy", ps.Audit[0].Namespace+"/"+ps.Audit[0].Name)
		} else {
			out = append(out, buildRBAC(f, rbacv3.RBAC_LOG, ps.Audit, ""))
		}
	}
	if len(ps.Deny) > 0 {
		out = append(out, buildRBAC(f, rbacv3.RBAC_DENY, ps.Deny, ""))
	}
	if len(ps.Allow) > 0 {
		out = append(out, buildRBAC(f, rbacv3.RBAC_ALLOW, ps.Allow, ""))
	}
	return out
}

func shadowPrefix(r *rbacv3.RBAC) string {
	switch {
	case r == nil:
		return ""
	case r.GetAction() == rbacv3.RBAC_ALLOW:
		return "istio_dry_run_allow_"
	}
	return "istio_dry_run_deny_"
}

// rbacHTTPFilters are the HTTP RBAC filters of a workload, before the router.
func rbacHTTPFilters(f rbacFlavor, ps model.AuthorizationPolicies) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	sets := authzSets(f, ps)
	if f == grpcHTTP && len(ps.Custom) > 0 && len(ps.Deny) > 0 {
		// One DENY filter: grpc-go refuses two filters of one name.
		for k, v := range sets[1].rules.GetPolicies() {
			sets[0].rules.Policies[k] = v
		}
		sets = append(sets[:1], sets[2:]...)
	}
	for _, s := range sets {
		name := rbacHTTPFilter
		if f == grpcHTTP && s.rules.GetAction() == rbacv3.RBAC_DENY {
			name = rbacHTTPFilterDeny
		}
		cfg := &rbachttpv3.RBAC{Rules: s.rules, ShadowRules: s.shadow, ShadowRulesStatPrefix: shadowPrefix(s.shadow)}
		out = append(out, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(cfg)}})
	}
	return out
}

// rbacNetworkFilters are the network RBAC filters of a TCP chain: the
// same policies with HTTP-only conditions dropped as Istio drops them.
func rbacNetworkFilters(ps model.AuthorizationPolicies) []*listenerv3.Filter {
	var out []*listenerv3.Filter
	for _, s := range authzSets(envoyTCP, ps) {
		cfg := &rbacnetv3.RBAC{Rules: s.rules, ShadowRules: s.shadow, ShadowRulesStatPrefix: shadowPrefix(s.shadow), StatPrefix: rbacTCPStatPrefix}
		out = append(out, &listenerv3.Filter{Name: rbacNetworkFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(cfg)}})
	}
	return out
}
