package gen

import (
	"errors"
	"fmt"
	"strings"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	apisec "istio.io/api/security/v1beta1"
)

// An AuthorizationPolicy rule becomes one RBAC policy: its permissions
// ("to", one per operation) and principals ("from", one per source) are
// each an AND of conditions, a condition an OR of its values (not-values
// an OR under a NOT), and the rule's "when" conditions join the AND of
// every source or operation, as Istio renders them.

// errHTTPOnly marks a condition a TCP filter cannot check.
var errHTTPOnly = errors.New("HTTP only")

// errUnsupported marks an attribute Skiff cannot render (connection.sni,
// experimental.envoy.filters.*).
var errUnsupported = errors.New("not supported")

// cond is one condition: a key, its values and not-values, and how one
// value is rendered (perm for "to" keys, prin for "from" keys).
type cond struct {
	key          string
	values, nots []string
	perm         func(v string, tcp bool) (*rbacv3.Permission, error)
	prin         func(v string, tcp bool) (*rbacv3.Principal, error)
}

// ruleConds splits a rule's "when" conditions into permission and
// principal conditions (in "when" order); an unknown key fails the rule.
func ruleConds(r *apisec.Rule, policyNS string) (perms, prins []cond, err error) {
	for _, w := range r.GetWhen() {
		k, vs, nvs := w.GetKey(), w.GetValues(), w.GetNotValues()
		switch {
		case k == "destination.ip":
			perms = append(perms, cond{key: k, values: vs, nots: nvs, perm: destIP})
		case k == "destination.port":
			perms = append(perms, cond{key: k, values: vs, nots: nvs, perm: destPort})
		case k == "source.ip":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: directRemoteIP})
		case k == "remote.ip":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: remoteIP})
		case k == "source.namespace":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: sourceNamespace})
		case k == "source.principal":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: sourcePrincipal})
		case k == "source.serviceAccount":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: serviceAccount(policyNS)})
		case strings.HasPrefix(k, "request.headers"):
			name, ok := bracketed(strings.TrimPrefix(k, "request.headers"))
			if !ok {
				return nil, nil, fmt.Errorf("when key %q: want request.headers[NAME]", k)
			}
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: func(v string, tcp bool) (*rbacv3.Principal, error) {
				if tcp {
					return nil, errHTTPOnly
				}
				return &rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: headerMatch(name, v, false)}}, nil
			}})
		case k == "source.trustDomain":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: sourceTrustDomain})
		case k == "request.auth.principal":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: requestPrincipal})
		case k == "request.auth.audiences":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: claim("aud")})
		case k == "request.auth.presenter":
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: claim("azp")})
		case strings.HasPrefix(k, "request.auth.claims"):
			path, err := claimPath(strings.TrimPrefix(k, "request.auth.claims"))
			if err != nil {
				return nil, nil, fmt.Errorf("when key %q: %w", k, err)
			}
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: claim(path...)})
		case k == "connection.sni" || strings.HasPrefix(k, "experimental.envoy.filters."):
			prins = append(prins, cond{key: k, values: vs, nots: nvs, prin: func(string, bool) (*rbacv3.Principal, error) { return nil, errUnsupported }})
		default:
			return nil, nil, fmt.Errorf("when key %q: unknown attribute", k)
		}
	}
	return perms, prins, nil
}

// buildRule renders one rule; an error means the rule matches nothing it
// could not check: for ALLOW the rule is dropped (allowing less), for DENY
// and AUDIT only the failing condition is (denying more).
func buildRule(r *apisec.Rule, policyNS string, tcp, strict bool) (*rbacv3.Policy, error) {
	whenPerms, whenPrins, err := ruleConds(r, policyNS)
	if err != nil {
		return nil, err
	}
	pol := &rbacv3.Policy{}
	for _, to := range r.GetTo() {
		o := to.GetOperation()
		cs := []cond{
			{key: "hosts", values: o.GetHosts(), nots: o.GetNotHosts(), perm: host},
			{key: "methods", values: o.GetMethods(), nots: o.GetNotMethods(), perm: method},
			{key: "paths", values: o.GetPaths(), nots: o.GetNotPaths(), perm: path},
			{key: "ports", values: o.GetPorts(), nots: o.GetNotPorts(), perm: destPort},
		}
		p, err := andPermissions(append(cs, whenPerms...), tcp, strict)
		if err != nil {
			return nil, err
		}
		pol.Permissions = append(pol.Permissions, p)
	}
	if len(r.GetTo()) == 0 {
		p, err := andPermissions(whenPerms, tcp, strict)
		if err != nil {
			return nil, err
		}
		pol.Permissions = append(pol.Permissions, p)
	}
	for _, from := range r.GetFrom() {
		s := from.GetSource()
		cs := []cond{
			{key: "principals", values: s.GetPrincipals(), nots: s.GetNotPrincipals(), prin: sourcePrincipal},
			{key: "requestPrincipals", values: s.GetRequestPrincipals(), nots: s.GetNotRequestPrincipals(), prin: requestPrincipal},
			{key: "serviceAccounts", values: s.GetServiceAccounts(), nots: s.GetNotServiceAccounts(), prin: serviceAccount(policyNS)},
			{key: "trustDomains", values: s.GetTrustDomains(), nots: s.GetNotTrustDomains(), prin: sourceTrustDomain},
			{key: "namespaces", values: s.GetNamespaces(), nots: s.GetNotNamespaces(), prin: sourceNamespace},
			{key: "remoteIpBlocks", values: s.GetRemoteIpBlocks(), nots: s.GetNotRemoteIpBlocks(), prin: remoteIP},
			{key: "ipBlocks", values: s.GetIpBlocks(), nots: s.GetNotIpBlocks(), prin: directRemoteIP},
		}
		p, err := andPrincipals(append(cs, whenPrins...), tcp, strict)
		if err != nil {
			return nil, err
		}
		pol.Principals = append(pol.Principals, p)
	}
	if len(r.GetFrom()) == 0 {
		p, err := andPrincipals(whenPrins, tcp, strict)
		if err != nil {
			return nil, err
		}
		pol.Principals = append(pol.Principals, p)
	}
	return pol, nil
}

// matcherSet builds one kind of RBAC matcher, permissions or principals.
type matcherSet[T any] struct {
	match    func(c cond, v string, tcp bool) (T, error)
	or, and  func([]T) T
	not      func(T) T
	anything func() T
}

var permissionSet = matcherSet[*rbacv3.Permission]{
	match: func(c cond, v string, tcp bool) (*rbacv3.Permission, error) { return c.perm(v, tcp) },
	or: func(ps []*rbacv3.Permission) *rbacv3.Permission {
		return &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: ps}}}
	},
	and: func(ps []*rbacv3.Permission) *rbacv3.Permission {
		return &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: ps}}}
	},
	not: func(p *rbacv3.Permission) *rbacv3.Permission {
		return &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: p}}
	},
	anything: func() *rbacv3.Permission { return &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}} },
}

var principalSet = matcherSet[*rbacv3.Principal]{
	match: func(c cond, v string, tcp bool) (*rbacv3.Principal, error) { return c.prin(v, tcp) },
	or: func(ps []*rbacv3.Principal) *rbacv3.Principal {
		return &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: ps}}}
	},
	and: func(ps []*rbacv3.Principal) *rbacv3.Principal {
		return &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: ps}}}
	},
	not: func(p *rbacv3.Principal) *rbacv3.Principal {
		return &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: p}}
	},
	anything: func() *rbacv3.Principal { return &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}} },
}

// andOf ANDs the conditions cs: each one's values ORed, its nots ORed and
// negated. A value that cannot be rendered fails when strict, else is left
// out; no condition at all matches anything.
func andOf[T any](cs []cond, tcp, strict bool, set matcherSet[T]) (T, error) {
	var and []T
	for _, c := range cs {
		for i, vals := range [][]string{c.values, c.nots} {
			var or []T
			for _, v := range vals {
				m, err := set.match(c, v, tcp)
				if err != nil {
					if strict {
						var zero T
						return zero, fmt.Errorf("%s %q: %w", c.key, v, err)
					}
					continue
				}
				or = append(or, m)
			}
			if len(or) == 0 {
				continue
			}
			m := set.or(or)
			if i == 1 {
				m = set.not(m)
			}
			and = append(and, m)
		}
	}
	if len(and) == 0 {
		and = []T{set.anything()}
	}
	return set.and(and), nil
}

func andPermissions(cs []cond, tcp, strict bool) (*rbacv3.Permission, error) {
	return andOf(cs, tcp, strict, permissionSet)
}

func andPrincipals(cs []cond, tcp, strict bool) (*rbacv3.Principal, error) {
	return andOf(cs, tcp, strict, principalSet)
}
