package model

import (
	"cmp"

	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"
	apisec "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
)

// DefaultRootNamespace is Istio's default mesh rootNamespace: the
// namespace whose security policies without a selector apply to the whole
// mesh, and whose policies with a selector apply to matching workloads in
// every namespace.
const DefaultRootNamespace = "istio-system"

// DefaultTrustDomain is Istio's default mesh trustDomain, of workload
// identities spiffe://TRUST_DOMAIN/ns/NS/sa/SA.
const DefaultTrustDomain = "cluster.local"

// SecurityPolicies is the security configuration of one push context, by
// namespace, each list oldest first (ties by name), with the mesh config
// settings that decide how it applies.
type SecurityPolicies struct {
	// RootNamespace is the mesh config's rootNamespace.
	RootNamespace string
	// TrustDomain is the mesh config's trustDomain.
	TrustDomain string
	// AutoMTLS is the mesh config's enableAutoMtls.
	AutoMTLS bool

	PeerAuthentications    map[string][]*security.PeerAuthentication
	AuthorizationPolicies  map[string][]*security.AuthorizationPolicy
	RequestAuthentications map[string][]*security.RequestAuthentication
}

// MeshRootNamespace is the mesh config's rootNamespace, Istio's default
// when unset.
func MeshRootNamespace(mc *meshconfig.MeshConfig) string {
	return cmp.Or(mc.GetRootNamespace(), DefaultRootNamespace)
}

func indexSecurity(in *Inputs, mc *meshconfig.MeshConfig) *SecurityPolicies {
	return &SecurityPolicies{
		RootNamespace:          MeshRootNamespace(mc),
		TrustDomain:            cmp.Or(mc.GetTrustDomain(), DefaultTrustDomain),
		AutoMTLS:               mc.GetEnableAutoMtls() == nil || mc.GetEnableAutoMtls().GetValue(),
		PeerAuthentications:    byNamespace(sortedByAge(in.PeerAuthentications)),
		AuthorizationPolicies:  byNamespace(sortedByAge(in.AuthorizationPolicies)),
		RequestAuthentications: byNamespace(sortedByAge(in.RequestAuthentications)),
	}
}

func byNamespace[T interface{ GetNamespace() string }](objs []T) map[string][]T {
	m := map[string][]T{}
	for _, o := range objs {
		m[o.GetNamespace()] = append(m[o.GetNamespace()], o)
	}
	return m
}

// hash feeds every policy to put, in a stable order.
func (s *SecurityPolicies) hash(put func(kind, ns, name string, m proto.Message)) {
	for _, ns := range sortedKeys(s.PeerAuthentications) {
		for _, v := range s.PeerAuthentications[ns] {
			put("pa", v.Namespace, v.Name, &v.Spec)
		}
	}
	for _, ns := range sortedKeys(s.AuthorizationPolicies) {
		for _, v := range s.AuthorizationPolicies[ns] {
			put("ap", v.Namespace, v.Name, &v.Spec)
		}
	}
	for _, ns := range sortedKeys(s.RequestAuthentications) {
		for _, v := range s.RequestAuthentications[ns] {
			put("ra", v.Namespace, v.Name, &v.Spec)
		}
	}
}

// Domain is the trust domain of workload identities: the mesh config's,
// Istio's default without one.
func (s *SecurityPolicies) Domain() string {
	if s == nil || s.TrustDomain == "" {
		return DefaultTrustDomain
	}
	return s.TrustDomain
}

// AutoMTLSEnabled reports the mesh config's enableAutoMtls (true without
// one, as Istio).
func (s *SecurityPolicies) AutoMTLSEnabled() bool { return s == nil || s.AutoMTLS }

// Workload names the workload a policy is selected for.
type Workload struct {
	Namespace string
	Labels    map[string]string
}

// selects reports whether a policy in namespace ns with selector sel
// applies to w: a policy in w's namespace or the root namespace, with no
// selector or one matching w's labels. Policies with targetRefs are
// for gateways and waypoints, never for sidecars or proxyless servers.
func (s *SecurityPolicies) selects(ns string, sel *apitype.WorkloadSelector, refs int, w Workload) bool {
	if refs > 0 || (ns != w.Namespace && ns != s.RootNamespace) {
		return false
	}
	if sel == nil || len(sel.GetMatchLabels()) == 0 {
		return true
	}
	return w.Labels != nil && LabelsMatch(sel.GetMatchLabels(), w.Labels)
}

// AuthorizationPolicies are the policies that apply to a workload, by
// action, each oldest first (root namespace first).
type AuthorizationPolicies struct {
	Custom, Deny, Allow, Audit []*security.AuthorizationPolicy
}

// Empty reports whether no policy applies.
func (a AuthorizationPolicies) Empty() bool {
	return len(a.Custom)+len(a.Deny)+len(a.Allow)+len(a.Audit) == 0
}

// AuthorizationPoliciesFor returns the AuthorizationPolicies selecting w.
func (s *SecurityPolicies) AuthorizationPoliciesFor(w Workload) AuthorizationPolicies {
	var out AuthorizationPolicies
	if s == nil {
		return out
	}
	for _, ns := range s.policyNamespaces(w.Namespace) {
		for _, p := range s.AuthorizationPolicies[ns] {
			if !s.selects(p.Namespace, p.Spec.GetSelector(), len(p.Spec.GetTargetRefs())+boolInt(p.Spec.GetTargetRef() != nil), w) {
				continue
			}
			switch p.Spec.GetAction() {
			case apisec.AuthorizationPolicy_ALLOW:
				out.Allow = append(out.Allow, p)
			case apisec.AuthorizationPolicy_DENY:
				out.Deny = append(out.Deny, p)
			case apisec.AuthorizationPolicy_AUDIT:
				out.Audit = append(out.Audit, p)
			case apisec.AuthorizationPolicy_CUSTOM:
				out.Custom = append(out.Custom, p)
			}
		}
	}
	return out
}

// RequestAuthenticationsFor returns the RequestAuthentications selecting
// w, root namespace first, each oldest first.
func (s *SecurityPolicies) RequestAuthenticationsFor(w Workload) []*security.RequestAuthentication {
	if s == nil {
		return nil
	}
	var out []*security.RequestAuthentication
	for _, ns := range s.policyNamespaces(w.Namespace) {
		for _, p := range s.RequestAuthentications[ns] {
			if s.selects(p.Namespace, p.Spec.GetSelector(), len(p.Spec.GetTargetRefs())+boolInt(p.Spec.GetTargetRef() != nil), w) {
				out = append(out, p)
			}
		}
	}
	return out
}

func (s *SecurityPolicies) policyNamespaces(ns string) []string {
	if ns == s.RootNamespace {
		return []string{ns}
	}
	return []string{s.RootNamespace, ns}
}
