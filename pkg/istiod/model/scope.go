package model

import (
	"strings"

	meshconfig "istio.io/api/mesh/v1alpha1"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// OutboundMode is what proxies do with traffic to destinations outside the
// registry (Istio's outboundTrafficPolicy.mode).
type OutboundMode int

// The outbound traffic policy modes.
const (
	// OutboundAllowAny forwards unknown destinations (PassthroughCluster).
	OutboundAllowAny OutboundMode = iota
	// OutboundRegistryOnly drops them (BlackHoleCluster).
	OutboundRegistryOnly
)

// String returns Istio's name of the mode.
func (m OutboundMode) String() string {
	if m == OutboundRegistryOnly {
		return "REGISTRY_ONLY"
	}
	return "ALLOW_ANY"
}

// Scope is what one class of proxies sees: the services their Sidecar (or,
// without one, exportTo alone) makes visible, with the VirtualService and
// DestinationRule that apply to each. Proxies in one namespace under the same
// Sidecar share a Scope.
type Scope struct {
	// Key identifies the scope within a push ("ns/sidecar-name").
	Key string
	// Namespace is the proxies' namespace.
	Namespace string
	// Domain is the push's cluster DNS domain (PushContext.Domain).
	Domain string
	// Sidecar is the Sidecar resource in effect, or nil.
	Sidecar *networking.Sidecar
	// Services are the visible services, sorted by host name.
	Services []*Service
	// VirtualService maps a visible host to the VirtualService that routes it.
	VirtualService map[string]*networking.VirtualService
	// DestinationRule maps a visible host to its DestinationRule.
	DestinationRule map[string]*networking.DestinationRule
	// OutboundPolicy is the Sidecar's outboundTrafficPolicy mode or, when
	// the Sidecar sets none, the mesh's (see meshOutboundPolicy).
	OutboundPolicy OutboundMode
	// EgressProxy is where ALLOW_ANY sends unknown destinations instead of
	// passing them through (the Sidecar's egressProxy), or nil.
	EgressProxy *apinet.Destination

	visible map[string]*Service
	peer    *Scope // see Peer
}

// Visible reports whether host is in the scope.
func (s *Scope) Visible(host string) bool { return s.visible[host] != nil }

// Service returns the visible service of host as the scope sees it (only
// the ports its Sidecar's egress listeners admit), or nil.
func (s *Scope) Service(host string) *Service { return s.visible[host] }

// meshOutboundPolicy is the mesh config's outbound traffic policy.
func (pc *PushContext) meshOutboundPolicy() OutboundMode { return MeshOutboundMode(pc.Mesh) }

// MeshOutboundMode is the outbound traffic policy of a mesh config (nil,
// or no policy: ALLOW_ANY, Istio's default).
func MeshOutboundMode(m *meshconfig.MeshConfig) OutboundMode {
	if otp := m.GetOutboundTrafficPolicy(); otp != nil && otp.GetMode() == meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY {
		return OutboundRegistryOnly
	}
	return OutboundAllowAny
}

// scopes caches the scope of each namespace and Sidecar: scopes are built
// from configuration alone.
var scopes = NewMemo[scopeKey, *Scope]()

// scopeKey is a proxy's namespace and the name of the Sidecar that applies
// to it ("" for none). A struct: looking a scope up, once per proxy per
// push, allocates nothing.
type scopeKey struct{ ns, sidecar string }

// ScopeFor returns the scope of proxy p, shared by proxies like it.
func (pc *PushContext) ScopeFor(p *Proxy) *Scope {
	sc := pc.sidecarFor(p)
	k := scopeKey{ns: p.Namespace}
	if sc != nil {
		k.sidecar = sc.Name
	}
	return scopes.Get(pc, k, func() *Scope { return pc.buildScope(k.ns+"/"+k.sidecar, k.ns, sc) })
}

func (pc *PushContext) sidecarFor(p *Proxy) *networking.Sidecar {
	list := pc.Sidecars[p.Namespace]
	if len(list) == 0 {
		return nil
	}
	labels := p.WorkloadLabels(pc)
	for _, sc := range list {
		sel := sc.Spec.GetWorkloadSelector()
		if sel == nil || (len(sel.GetLabels()) > 0 && LabelsMatch(sel.GetLabels(), labels)) {
			return sc
		}
	}
	return nil
}

func (pc *PushContext) buildScope(key, ns string, sc *networking.Sidecar) *Scope {
	// A scope without a Sidecar sees about every service: sized for all,
	// it never grows. A Sidecar's may see a few, and grows.
	n := len(pc.Services)
	if sc != nil {
		n = 0
	}
	s := &Scope{Key: key, Namespace: ns, Domain: pc.Domain, Sidecar: sc, OutboundPolicy: pc.meshOutboundPolicy(),
		Services: make([]*Service, 0, n), visible: make(map[string]*Service, n),
		VirtualService: map[string]*networking.VirtualService{}, DestinationRule: map[string]*networking.DestinationRule{}}
	if otp := sidecarOutbound(sc); otp != nil {
		s.OutboundPolicy = OutboundAllowAny
		if otp.GetMode() == apinet.OutboundTrafficPolicy_REGISTRY_ONLY {
			s.OutboundPolicy = OutboundRegistryOnly
		}
		s.EgressProxy = otp.GetEgressProxy()
	}
	eg := newEgress(sc)
	for _, svc := range pc.Services {
		if !svc.VisibleTo(ns) {
			continue
		}
		if sc != nil {
			if svc = eg.admit(svc); svc == nil {
				continue
			}
		}
		s.Services = append(s.Services, svc)
		s.visible[svc.Hostname] = svc
	}
	for _, svc := range s.Services {
		if vs := pc.virtualService(ns, svc); vs != nil {
			s.VirtualService[svc.Hostname] = vs
		}
		if dr := pc.destinationRule(ns, svc); dr != nil {
			s.DestinationRule[svc.Hostname] = dr
		}
	}
	s.peer = pc.peerOf(s)
	return s
}

// egressAllows reports whether a Sidecar egress host list ("ns/host") in
// namespace scNS admits svc.
func egressAllows(hosts []string, scNS string, svc *Service) bool {
	for _, h := range hosts {
		ns, host, ok := strings.Cut(h, "/")
		if !ok {
			ns, host = "*", h
		}
		if ns == "." {
			ns = scNS
		}
		if ns != "*" && ns != svc.Namespace {
			continue
		}
		if HostMatches(host, svc.Hostname) {
			return true
		}
	}
	return false
}

// HostMatches reports whether pattern ("*", "*.example.com" or a name)
// matches host.
func HostMatches(pattern, host string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:])
	}
	return pattern == host
}
