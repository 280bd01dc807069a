package gen

import (
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// The traffic policy of one cluster is resolved the way Istio resolves it:
// a port-level setting for the cluster's port replaces the rule's top-level
// policy as a whole (fields it leaves out take their defaults, they are not
// inherited), and a subset's policy then overrides the result field by
// field (connectionPool, outlierDetection, loadBalancer, tls), except that a
// subset port-level setting replaces all four.

// portPolicy returns the policy that applies on port: the port-level
// setting for it when there is one (and true), else tp itself.
func portPolicy(tp *apinet.TrafficPolicy, port uint16) (*apinet.TrafficPolicy, bool) {
	if tp == nil {
		return nil, false
	}
	for _, p := range tp.GetPortLevelSettings() {
		if p.GetPort() != nil && p.GetPort().GetNumber() == uint32(port) {
			return &apinet.TrafficPolicy{
				ConnectionPool:   p.GetConnectionPool(),
				LoadBalancer:     p.GetLoadBalancer(),
				OutlierDetection: p.GetOutlierDetection(),
				Tls:              p.GetTls(),
			}, true
		}
	}
	return tp, false
}

// subsetPolicy merges a subset's policy over the rule's, both resolved for
// port first.
func subsetPolicy(top, sub *apinet.TrafficPolicy, port uint16) *apinet.TrafficPolicy {
	top, _ = portPolicy(top, port)
	if sub == nil {
		return top
	}
	sub, wholesale := portPolicy(sub, port)
	if top == nil {
		return sub
	}
	out := &apinet.TrafficPolicy{
		ConnectionPool:   top.GetConnectionPool(),
		LoadBalancer:     top.GetLoadBalancer(),
		OutlierDetection: top.GetOutlierDetection(),
		Tls:              top.GetTls(),
		Tunnel:           top.GetTunnel(),
		ProxyProtocol:    top.GetProxyProtocol(),
		RetryBudget:      top.GetRetryBudget(),
	}
	if sub.ConnectionPool != nil || wholesale {
		out.ConnectionPool = sub.ConnectionPool
	}
	if sub.OutlierDetection != nil || wholesale {
		out.OutlierDetection = sub.OutlierDetection
	}
	if sub.LoadBalancer != nil || wholesale {
		out.LoadBalancer = sub.LoadBalancer
	}
	if sub.Tls != nil || wholesale {
		out.Tls = sub.Tls
	}
	if sub.Tunnel != nil {
		out.Tunnel = sub.Tunnel
	}
	if sub.ProxyProtocol != nil {
		out.ProxyProtocol = sub.ProxyProtocol
	}
	if sub.RetryBudget != nil {
		out.RetryBudget = sub.RetryBudget
	}
	return out
}

// clusterPolicy is the traffic policy of the cluster of dr's host on port
// for subset ("" for the default cluster), resolved as outboundClusters
// resolves it; nil when nothing applies (a subset dr does not define gets
// the default cluster's policy).
func clusterPolicy(dr *networking.DestinationRule, port uint16, subset string) *apinet.TrafficPolicy {
	if dr == nil {
		return nil
	}
	top := dr.Spec.GetTrafficPolicy()
	if subset != "" {
		for _, s := range dr.Spec.GetSubsets() {
			if s.GetName() == subset {
				return subsetPolicy(top, s.GetTrafficPolicy(), port)
			}
		}
	}
	p, _ := portPolicy(top, port)
	return p
}
