package model

import (
	apisec "istio.io/api/security/v1beta1"
	security "istio.io/client-go/pkg/apis/security/v1"
)

// MTLSMode is the effective mutual TLS mode of an inbound port.
type MTLSMode int

// The modes, as Istio names them.
const (
	// MTLSUnknown is no decision (never the result of EffectiveMTLS).
	MTLSUnknown MTLSMode = iota
	// MTLSDisable accepts plaintext only.
	MTLSDisable
	// MTLSPermissive accepts both mutual TLS and plaintext.
	MTLSPermissive
	// MTLSStrict accepts mutual TLS only.
	MTLSStrict
)

// String returns Istio's name of the mode.
func (m MTLSMode) String() string {
	switch m {
	case MTLSDisable:
		return "DISABLE"
	case MTLSPermissive:
		return "PERMISSIVE"
	case MTLSStrict:
		return "STRICT"
	}
	return "UNKNOWN"
}

func modeOf(m *apisec.PeerAuthentication_MutualTLS) MTLSMode {
	switch m.GetMode() {
	case apisec.PeerAuthentication_MutualTLS_DISABLE:
		return MTLSDisable
	case apisec.PeerAuthentication_MutualTLS_PERMISSIVE:
		return MTLSPermissive
	case apisec.PeerAuthentication_MutualTLS_STRICT:
		return MTLSStrict
	}
	return MTLSUnknown // UNSET or absent: inherit
}

// MTLSPolicy is the PeerAuthentication result for one workload: a mode
// for the workload and overrides per workload (target) port.
type MTLSPolicy struct {
	Mode  MTLSMode
	Ports map[uint32]MTLSMode
}

// ForPort returns the mode of a workload port.
func (p MTLSPolicy) ForPort(port uint32) MTLSMode {
	if m, ok := p.Ports[port]; ok {
		return m
	}
	return p.Mode
}

// EffectiveMTLS composes the PeerAuthentications that apply to w, as Istio
// does: the oldest mesh-wide policy (root namespace, no selector), then
// the oldest namespace policy (no selector), then the oldest policy whose
// selector matches w, each overriding the one before unless its mode is
// UNSET; the workload policy's portLevelMtls overrides per port (UNSET
// inherits the workload's mode). With nothing set the mode is PERMISSIVE.
func (s *SecurityPolicies) EffectiveMTLS(w Workload) MTLSPolicy {
	out := MTLSPolicy{Mode: MTLSPermissive}
	if s == nil {
		return out
	}
	var mesh, ns, wl *security.PeerAuthentication
	for _, p := range s.PeerAuthentications[s.RootNamespace] {
		if len(p.Spec.GetSelector().GetMatchLabels()) == 0 && mesh == nil {
			mesh = p
		}
	}
	for _, p := range s.PeerAuthentications[w.Namespace] {
		if len(p.Spec.GetSelector().GetMatchLabels()) == 0 {
			if ns == nil && w.Namespace != s.RootNamespace {
				ns = p
			}
			continue
		}
		if wl == nil && w.Labels != nil && LabelsMatch(p.Spec.GetSelector().GetMatchLabels(), w.Labels) {
			wl = p
		}
	}
	for _, p := range []*security.PeerAuthentication{mesh, ns, wl} {
		if p == nil {
			continue
		}
		if m := modeOf(p.Spec.GetMtls()); m != MTLSUnknown {
			out.Mode = m
		}
	}
	if wl != nil && len(wl.Spec.GetPortLevelMtls()) > 0 {
		out.Ports = map[uint32]MTLSMode{}
		for port, m := range wl.Spec.GetPortLevelMtls() {
			mode := modeOf(m)
			if mode == MTLSUnknown {
				mode = out.Mode
			}
			out.Ports[port] = mode
		}
	}
	return out
}
