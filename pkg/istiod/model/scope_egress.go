package model

import (
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// sidecarOutbound is a Sidecar's outbound traffic policy, or nil.
func sidecarOutbound(sc *networking.Sidecar) *apinet.OutboundTrafficPolicy {
	if sc == nil {
		return nil
	}
	return sc.Spec.GetOutboundTrafficPolicy()
}

// egress is a Sidecar's egress listeners: those bound to a port decide
// which hosts that port reaches; the others (Istio allows one) decide for
// every other port.
type egress struct {
	ns       string
	byPort   map[uint32][]string
	catchAll []string
}

func newEgress(sc *networking.Sidecar) *egress {
	e := &egress{byPort: map[uint32][]string{}}
	if sc == nil {
		return e
	}
	e.ns = sc.Namespace
	for _, l := range sc.Spec.GetEgress() {
		if p := l.GetPort().GetNumber(); p != 0 {
			e.byPort[p] = append(e.byPort[p], l.GetHosts()...)
		} else {
			e.catchAll = append(e.catchAll, l.GetHosts()...)
		}
	}
	return e
}

// admit returns svc as the Sidecar lets its proxies see it: nil when no
// port is admitted, a copy with the admitted ports when only some are.
func (e *egress) admit(svc *Service) *Service {
	if len(e.byPort) == 0 {
		if egressAllows(e.catchAll, e.ns, svc) {
			return svc
		}
		return nil
	}
	var ports []Port
	for _, p := range svc.Ports {
		hosts, bound := e.byPort[uint32(p.Port)]
		if !bound {
			hosts = e.catchAll
		}
		if egressAllows(hosts, e.ns, svc) {
			ports = append(ports, p)
		}
	}
	switch len(ports) {
	case 0:
		return nil
	case len(svc.Ports):
		return svc
	}
	cp := *svc
	cp.Ports = ports
	return &cp
}
