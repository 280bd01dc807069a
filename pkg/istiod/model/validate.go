package model

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FieldError is a validation failure of one field.
type FieldError struct {
	// Field is the path ("spec.ports[0].port").
	Field string
	// Value is the offending value, printed with %v.
	Value any
	// Reason says what is wrong.
	Reason string
}

// Error returns "field: value: reason".
func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v: %s", e.Field, e.Value, e.Reason) }

type errs []error

func (es *errs) add(field string, value any, reason string) {
	*es = append(*es, &FieldError{Field: field, Value: value, Reason: reason})
}

// Validate checks an object the way istiod needs it; the error joins one
// FieldError per problem.
func Validate(obj any) error {
	var es errs
	switch o := obj.(type) {
	case *corev1.Service:
		validateMeta(&es, o.Name, o.Namespace)
		validateService(&es, o)
	case *discoveryv1.EndpointSlice:
		validateMeta(&es, o.Name, o.Namespace)
		validateSlice(&es, o)
	case *corev1.Pod:
		validateMeta(&es, o.Name, o.Namespace)
		if ip := o.Status.PodIP; ip != "" {
			if _, err := netip.ParseAddr(ip); err != nil {
				es.add("status.podIP", ip, "not an IP address")
			}
		}
	case *networking.ServiceEntry:
		validateMeta(&es, o.Name, o.Namespace)
		validateServiceEntry(&es, &o.Spec)
	case *networking.WorkloadEntry:
		validateMeta(&es, o.Name, o.Namespace)
		if o.Spec.GetAddress() == "" {
			es.add("spec.address", `""`, "required")
		}
	case *networking.VirtualService:
		validateMeta(&es, o.Name, o.Namespace)
		validateVirtualService(&es, &o.Spec)
	case *networking.DestinationRule:
		validateMeta(&es, o.Name, o.Namespace)
		validateDestinationRule(&es, &o.Spec)
	case *networking.Sidecar:
		validateMeta(&es, o.Name, o.Namespace)
		for i, l := range o.Spec.GetEgress() {
			if len(l.GetHosts()) == 0 {
				es.add(fmt.Sprintf("spec.egress[%d].hosts", i), "[]", "at least one host required")
			}
			for j, h := range l.GetHosts() {
				if ns, host, ok := strings.Cut(h, "/"); !ok || ns == "" || host == "" {
					es.add(fmt.Sprintf("spec.egress[%d].hosts[%d]", i, j), h, `want "namespace/host" ("./*", "istio-system/*")`)
				}
			}
		}
	default:
		return fmt.Errorf("unsupported object type %T", obj)
	}
	return errors.Join(es...)
}

func validateMeta(es *errs, name, ns string) {
	if name == "" {
		es.add("metadata.name", `""`, "required")
	} else if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		es.add("metadata.name", name, msgs[0])
	}
	if msgs := validation.IsDNS1123Label(ns); ns != "" && len(msgs) > 0 {
		es.add("metadata.namespace", ns, msgs[0])
	}
}

func validatePort(es *errs, field string, n int64) {
	if n < 1 || n > 65535 {
		es.add(field, n, "must be in 1..65535")
	}
}

func validateService(es *errs, s *corev1.Service) {
	if ip := s.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if _, err := netip.ParseAddr(ip); err != nil {
			es.add("spec.clusterIP", ip, "not an IP address or None")
		}
	}
	seen := map[int32]bool{}
	for i, p := range s.Spec.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		validatePort(es, f+".port", int64(p.Port))
		if seen[p.Port] && p.Protocol == s.Spec.Ports[0].Protocol {
			es.add(f+".port", p.Port, "duplicate port")
		}
		seen[p.Port] = true
		if p.TargetPort.StrVal == "" && p.TargetPort.IntVal != 0 {
			validatePort(es, f+".targetPort", int64(p.TargetPort.IntVal))
		}
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			es.add(f+".name", `""`, "required when a service has more than one port")
		}
	}
}

func validateSlice(es *errs, s *discoveryv1.EndpointSlice) {
	if s.Labels["kubernetes.io/service-name"] == "" {
		es.add("metadata.labels[kubernetes.io/service-name]", `""`, "required: names the Service")
	}
	for i, p := range s.Ports {
		if p.Port != nil {
			validatePort(es, fmt.Sprintf("ports[%d].port", i), int64(*p.Port))
		}
	}
	for i, ep := range s.Endpoints {
		for j, a := range ep.Addresses {
			f := fmt.Sprintf("endpoints[%d].addresses[%d]", i, j)
			ip, err := netip.ParseAddr(a)
			switch {
			case s.AddressType == discoveryv1.AddressTypeFQDN:
			case err != nil:
				es.add(f, a, "not an IP address")
			case s.AddressType == discoveryv1.AddressTypeIPv4 && !ip.Is4():
				es.add(f, a, "not IPv4 (addressType IPv4)")
			case s.AddressType == discoveryv1.AddressTypeIPv6 && !ip.Is6():
				es.add(f, a, "not IPv6 (addressType IPv6)")
			}
		}
	}
}

func validateServiceEntry(es *errs, se *apinet.ServiceEntry) {
	if len(se.GetHosts()) == 0 {
		es.add("spec.hosts", "[]", "at least one host required")
	}
	for i, h := range se.GetHosts() {
		if h == "" || h == "*" || strings.Contains(h, "/") {
			es.add(fmt.Sprintf("spec.hosts[%d]", i), h, "not a host name")
		}
	}
	for i, a := range se.GetAddresses() {
		if _, err := netip.ParseAddr(a); err != nil {
			if _, err := netip.ParsePrefix(a); err != nil {
				es.add(fmt.Sprintf("spec.addresses[%d]", i), a, "not an IP address or CIDR")
			}
		}
	}
	if len(se.GetPorts()) == 0 {
		es.add("spec.ports", "[]", "at least one port required")
	}
	names := map[string]bool{}
	for i, p := range se.GetPorts() {
		f := fmt.Sprintf("spec.ports[%d]", i)
		validatePort(es, f+".number", int64(p.GetNumber()))
		if p.GetTargetPort() != 0 {
			validatePort(es, f+".targetPort", int64(p.GetTargetPort()))
		}
		if p.GetName() == "" {
			es.add(f+".name", `""`, "required")
		} else if names[p.GetName()] {
			es.add(f+".name", p.GetName(), "duplicate port name")
		}
		names[p.GetName()] = true
	}
	for i, ep := range se.GetEndpoints() {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		if ep.GetAddress() == "" {
			es.add(f+".address", `""`, "required")
		} else if _, err := netip.ParseAddr(ep.GetAddress()); err != nil && se.GetResolution() == apinet.ServiceEntry_STATIC {
			es.add(f+".address", ep.GetAddress(), "not an IP address (resolution STATIC)")
		}
		for name, n := range ep.GetPorts() {
			validatePort(es, f+".ports["+name+"]", int64(n))
		}
	}
	if se.GetResolution() == apinet.ServiceEntry_STATIC && len(se.GetEndpoints()) == 0 && se.GetWorkloadSelector() == nil {
		es.add("spec.endpoints", "[]", "resolution STATIC needs endpoints or a workloadSelector")
	}
}
