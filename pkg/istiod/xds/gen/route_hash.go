package gen

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// destinationHash is the consistent hash a DestinationRule asks for on a
// route destination, most specific first, as Istio picks it: the subset's
// port-level setting, the subset's, the rule's port-level setting, then the
// rule's. Port-level settings apply only when the destination names its
// port.
func destinationHash(dr *networking.DestinationRule, d *apinet.Destination) *apinet.LoadBalancerSettings_ConsistentHashLB {
	if dr == nil {
		return nil
	}
	tp := dr.Spec.GetTrafficPolicy()
	hash := tp.GetLoadBalancer().GetConsistentHash()
	port := d.GetPort().GetNumber()
	var subsetHash, subsetPortHash, portHash *apinet.LoadBalancerSettings_ConsistentHashLB
	if port != 0 {
		portHash = portLevelHash(tp.GetPortLevelSettings(), port)
	}
	for _, s := range dr.Spec.GetSubsets() {
		if s.GetName() == d.GetSubset() {
			subsetHash = s.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash()
			if port != 0 {
				subsetPortHash = portLevelHash(s.GetTrafficPolicy().GetPortLevelSettings(), port)
			}
			break
		}
	}
	switch {
	case subsetPortHash != nil:
		return subsetPortHash
	case subsetHash != nil:
		return subsetHash
	case portHash != nil:
		return portHash
	}
	return hash
}

// serviceHash is the consistent hash of a service port's default route:
// the rule's, or its port-level setting for the port.
func serviceHash(dr *networking.DestinationRule, port uint16) *apinet.LoadBalancerSettings_ConsistentHashLB {
	if dr == nil {
		return nil
	}
	tp := dr.Spec.GetTrafficPolicy()
	if h := portLevelHash(tp.GetPortLevelSettings(), uint32(port)); h != nil {
		return h
	}
	return tp.GetLoadBalancer().GetConsistentHash()
}

func portLevelHash(pls []*apinet.TrafficPolicy_PortTrafficPolicy, port uint32) *apinet.LoadBalancerSettings_ConsistentHashLB {
	for _, s := range pls {
		if s.GetPort().GetNumber() == port {
			return s.GetLoadBalancer().GetConsistentHash()
		}
	}
	return nil
}

// hashPolicy converts a consistent hash into a route hash policy. gRPC
// clients honour header hashing alone (grpc-go ignores the other kinds),
// so they get only that.
func hashPolicy(h *apinet.LoadBalancerSettings_ConsistentHashLB, grpc bool) *routev3.RouteAction_HashPolicy {
	switch k := h.GetHashKey().(type) {
	case *apinet.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
		return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
			Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: k.HttpHeaderName}}}
	}
	if grpc {
		return nil
	}
	switch k := h.GetHashKey().(type) {
	case *apinet.LoadBalancerSettings_ConsistentHashLB_HttpCookie:
		c := &routev3.RouteAction_HashPolicy_Cookie{Name: k.HttpCookie.GetName(), Path: k.HttpCookie.GetPath()}
		if t := k.HttpCookie.GetTtl(); t != nil {
			c.Ttl = durationpb.New(t.AsDuration())
		}
		for _, a := range k.HttpCookie.GetAttributes() {
			c.Attributes = append(c.Attributes, &routev3.RouteAction_HashPolicy_CookieAttribute{Name: a.GetName(), Value: a.GetValue()})
		}
		return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}}
	case *apinet.LoadBalancerSettings_ConsistentHashLB_UseSourceIp:
		return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: k.UseSourceIp}}}
	case *apinet.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName:
		return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{
			QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: k.HttpQueryParameterName}}}
	}
	return nil
}
