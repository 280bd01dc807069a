package validation

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The Kubernetes kinds istiod reads have only Istiod-level checks: the API
// server has validated them already, and the webhook does not see them.

func (c *checker) service(s *corev1.Service) {
	if ip := s.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if _, err := netip.ParseAddr(ip); err != nil {
			c.add("spec.clusterIP", ip, "not an IP address or None")
		}
	}
	seen := map[int32]bool{}
	for i, p := range s.Spec.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		c.port(f+".port", int64(p.Port))
		if seen[p.Port] && p.Protocol == s.Spec.Ports[0].Protocol {
			c.add(f+".port", p.Port, "duplicate port")
		}
		seen[p.Port] = true
		if p.TargetPort.StrVal == "" && p.TargetPort.IntVal != 0 {
			c.port(f+".targetPort", int64(p.TargetPort.IntVal))
		}
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			c.add(f+".name", `""`, "required when a service has more than one port")
		}
	}
}

func (c *checker) endpointSlice(s *discoveryv1.EndpointSlice) {
	if s.Labels["kubernetes.io/service-name"] == "" {
		c.add("metadata.labels[kubernetes.io/service-name]", `""`, "required: names the Service")
	}
	for i, p := range s.Ports {
		if p.Port != nil {
			c.port(fmt.Sprintf("ports[%d].port", i), int64(*p.Port))
		}
	}
	for i, ep := range s.Endpoints {
		for j, a := range ep.Addresses {
			f := fmt.Sprintf("endpoints[%d].addresses[%d]", i, j)
			ip, err := netip.ParseAddr(a)
			switch {
			case s.AddressType == discoveryv1.AddressTypeFQDN:
			case err != nil:
				c.add(f, a, "not an IP address")
			case s.AddressType == discoveryv1.AddressTypeIPv4 && !ip.Is4():
				c.add(f, a, "not IPv4 (addressType IPv4)")
			case s.AddressType == discoveryv1.AddressTypeIPv6 && !ip.Is6():
				c.add(f, a, "not IPv6 (addressType IPv6)")
			}
		}
	}
}

func (c *checker) pod(p *corev1.Pod) {
	if ip := p.Status.PodIP; ip != "" {
		if _, err := netip.ParseAddr(ip); err != nil {
			c.add("status.podIP", ip, "not an IP address")
		}
	}
}
