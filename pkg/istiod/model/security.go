package model

import (
	"google.golang.org/protobuf/proto"
	apisec "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
)

// RootNamespace is the namespace whose security policies without a
// selector apply to the whole mesh, and whose policies with a selector
// apply to matching workloads in every namespace. It is Istio's default
// rootNamespace; Skiff has no mesh config to change it yet.
const RootNamespace = "istio-system"

// TrustDomain is the trust domain of workload identities
// (spiffe://TrustDomain/ns/NS/sa/SA), the CA's default.
const TrustDomain = "cluster.local"

// SecurityPolicies is the security configuration of one push context, by
// namespace, each list oldest first (ties by name).
type SecurityPolicies struct {
	PeerAuthentications    map[string][]*security.PeerAuthentication
	AuthorizationPolicies  map[string][]*security.AuthorizationPolicy
	RequestAuthentications map[string][]*security.RequestAuthentication
}

func indexSecurity(in *Inputs) *SecurityPolicies {
	return &SecurityPolicies{
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

// Workload names the workload a policy is selected for.
type Workload struct {
	Namespace string
	Labels    map[string]string
}

// selects reports whether a policy in namespace ns with selector sel
// applies to w: a policy in w's namespace or the root namespace, with no
// selector or one matching w's labels. Policies with targetRefs are
// for gateways and waypoints, never for sidecars or proxyless servers.
func selects(ns string, sel *apitype.WorkloadSelector, refs int, w Workload) bool {
	if refs > 0 || (ns != w.Namespace && ns != RootNamespace) {
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
	for _, ns := range policyNamespaces(w.Namespace) {
		for _, p := range s.AuthorizationPolicies[ns] {
			if !selects(p.Namespace, p.Spec.GetSelector(), len(p.Spec.GetTargetRefs())+boolInt(p.Spec.GetTargetRef() != nil), w) {
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
	for _, ns := range policyNamespaces(w.Namespace) {
		for _, p := range s.RequestAuthentications[ns] {
			if selects(p.Namespace, p.Spec.GetSelector(), len(p.Spec.GetTargetRefs())+boolInt(p.Spec.GetTargetRef() != nil), w) {
				out = append(out, p)
			}
		}
	}
	return out
}

func policyNamespaces(ns string) []string {
	if ns == RootNamespace {
		return []string{ns}
	}
	return []string{RootNamespace, ns}
}
