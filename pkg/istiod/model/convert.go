package model

import (
	"net/netip"
	"slices"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// serviceFromKube converts a Kubernetes Service, naming it in the cluster
// domain.
func serviceFromKube(s *corev1.Service, domain string) *Service {
	svc := &Service{
		Hostname:  KubeHostnameIn(s.Name, s.Namespace, domain),
		Name:      s.Name,
		Namespace: s.Namespace,
		Registry:  RegistryKubernetes,
		Selector:  s.Spec.Selector,
	}
	if e := s.Annotations[ExportToAnnotation]; e != "" {
		for _, part := range strings.Split(e, ",") {
			svc.ExportTo = append(svc.ExportTo, strings.TrimSpace(part))
		}
	}
	switch {
	case s.Spec.Type == corev1.ServiceTypeExternalName:
		svc.Resolution = DNSLB
	case s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone:
		for _, ip := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
			if _, err := netip.ParseAddr(ip); err == nil && !slices.Contains(svc.Addresses, ip) {
				svc.Addresses = append(svc.Addresses, ip)
			}
		}
	}
	for _, p := range s.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue // UDP/SCTP are not proxied
		}
		proto := ParseProtocol(p.Name)
		if p.AppProtocol != nil && *p.AppProtocol != "" {
			proto = ParseProtocol(*p.AppProtocol)
		}
		port := Port{Name: p.Name, Port: uint16(p.Port), Protocol: proto}
		if p.TargetPort.StrVal != "" {
			port.TargetPortName = p.TargetPort.StrVal
		} else if p.TargetPort.IntVal > 0 && p.TargetPort.IntVal < 65536 {
			port.TargetPort = uint16(p.TargetPort.IntVal)
		}
		svc.Ports = append(svc.Ports, port)
	}
	sortPorts(svc.Ports)
	return svc
}

func sortPorts(ps []Port) {
	slices.SortFunc(ps, func(a, b Port) int { return int(a.Port) - int(b.Port) })
}

// servicesFromEntry converts a ServiceEntry into one Service per host.
func servicesFromEntry(se *networking.ServiceEntry) []*Service {
	spec := &se.Spec
	var ports []Port
	for _, p := range spec.GetPorts() {
		ports = append(ports, Port{Name: p.GetName(), Port: uint16(p.GetNumber()),
			Protocol: ParseProtocol(p.GetProtocol()), TargetPort: uint16(p.GetTargetPort())})
	}
	sortPorts(ports)
	res := ClientSideLB
	switch spec.GetResolution() {
	case apinet.ServiceEntry_NONE:
		res = Passthrough
	case apinet.ServiceEntry_DNS, apinet.ServiceEntry_DNS_ROUND_ROBIN:
		res = DNSLB
	}
	var addrs []string
	for _, a := range spec.GetAddresses() {
		if _, err := netip.ParseAddr(a); err == nil {
			addrs = append(addrs, a)
		}
	}
	var out []*Service
	for _, h := range spec.GetHosts() {
		out = append(out, &Service{
			Hostname:     h,
			Name:         se.Name,
			Namespace:    se.Namespace,
			Addresses:    addrs,
			Ports:        ports,
			Resolution:   res,
			MeshExternal: spec.GetLocation() == apinet.ServiceEntry_MESH_EXTERNAL,
			Registry:     RegistryExternal,
			ExportTo:     spec.GetExportTo(),
			Selector:     spec.GetWorkloadSelector().GetLabels(),
		})
	}
	return out
}

// workloadEndpoints turns a WorkloadEntry spec into endpoints for svc.
func workloadEndpoints(svc *Service, we *apinet.WorkloadEntry, healthy bool) []Endpoint {
	var out []Endpoint
	for _, p := range svc.Ports {
		target := p.Port
		if p.TargetPort != 0 {
			target = p.TargetPort
		}
		if n, ok := we.GetPorts()[p.Name]; ok && n > 0 {
			target = uint16(n)
		}
		w := we.GetWeight()
		if w == 0 {
			w = 1
		}
		_, ipErr := netip.ParseAddr(we.GetAddress())
		out = append(out, Endpoint{
			Address: we.GetAddress(), DNSName: ipErr != nil, Port: target, ServicePort: p.Port,
			Labels: we.GetLabels(), ServiceAccount: we.GetServiceAccount(),
			Locality: ParseLocality(we.GetLocality()), Healthy: healthy, Weight: w,
		})
	}
	return out
}

// sliceEndpoints turns the endpoints of a Kubernetes EndpointSlice into
// endpoints for svc; pods gives labels and identity.
func sliceEndpoints(svc *Service, k8s *corev1.Service, sl *discoveryv1.EndpointSlice, pods *podIndex) []Endpoint {
	var out []Endpoint
	for _, sp := range sl.Ports {
		if sp.Port == nil || *sp.Port <= 0 || *sp.Port > 65535 {
			continue
		}
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		var svcPort *Port
		for i, p := range svc.Ports {
			if p.Name == name || (name == "" && len(svc.Ports) == 1) {
				svcPort = &svc.Ports[i]
				break
			}
		}
		if svcPort == nil {
			continue
		}
		for _, ep := range sl.Endpoints {
			healthy := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			var pod *Pod
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				pod = pods.byName(k8s.Namespace, ep.TargetRef.Name)
			}
			for _, addr := range ep.Addresses {
				p := pod
				if p == nil {
					p = pods.byIP(addr)
				}
				e := Endpoint{Address: addr, Port: uint16(*sp.Port), ServicePort: svcPort.Port, Healthy: healthy, Weight: 1}
				if ep.Zone != nil {
					e.Locality.Zone = *ep.Zone
				}
				if p != nil {
					e.Labels = p.Labels
					e.ServiceAccount = p.ServiceAccount
					if r := p.Labels["topology.kubernetes.io/region"]; r != "" {
						e.Locality.Region = r
					}
					if z := p.Labels["topology.kubernetes.io/zone"]; z != "" && e.Locality.Zone == "" {
						e.Locality.Zone = z
					}
				}
				out = append(out, e)
			}
		}
	}
	return out
}
