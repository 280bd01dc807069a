package model

import "strings"

// Domain returns the cluster DNS domain d names ("corp.example"): lower
// case, without leading or trailing dots, DefaultDomain when empty.
func Domain(d string) string {
	if d = strings.ToLower(strings.Trim(d, ".")); d == "" {
		return DefaultDomain
	}
	return d
}

// KubeHostname returns the host name of a Kubernetes service in the default
// domain; KubeHostnameIn names it in another.
func KubeHostname(name, ns string) string { return KubeHostnameIn(name, ns, DefaultDomain) }

// KubeHostnameIn returns the host name of a Kubernetes service in the
// cluster domain ("reviews.default.svc.corp.example"; "" is DefaultDomain).
func KubeHostnameIn(name, ns, domain string) string {
	return name + "." + ns + ".svc." + Domain(domain)
}

// ResolveHost expands a short host name ("reviews") relative to namespace ns
// in the default domain; ResolveHostIn does so in another.
func ResolveHost(host, ns string) string { return ResolveHostIn(host, ns, DefaultDomain) }

// ResolveHostIn expands a short host name ("reviews") to the Kubernetes
// service of namespace ns in the cluster domain; names with a dot and "*"
// are returned as they are.
func ResolveHostIn(host, ns, domain string) string {
	if host == "*" || strings.Contains(host, ".") {
		return host
	}
	return KubeHostnameIn(host, ns, domain)
}

// KubeHostname returns the host name of a Kubernetes service in the push's
// cluster domain.
func (pc *PushContext) KubeHostname(name, ns string) string {
	return KubeHostnameIn(name, ns, pc.Domain)
}

// ResolveHost expands a short host name relative to namespace ns in the
// push's cluster domain.
func (pc *PushContext) ResolveHost(host, ns string) string { return ResolveHostIn(host, ns, pc.Domain) }

// ResolveHost expands a short host name relative to namespace ns in the
// cluster domain of the push the scope belongs to.
func (s *Scope) ResolveHost(host, ns string) string { return ResolveHostIn(host, ns, s.Domain) }
