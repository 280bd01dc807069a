package gen

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// lbEndpoint is one endpoint: its address, health, weight and, for a
// workload with a sidecar, the tlsMode metadata auto mTLS matches on.
func lbEndpoint(e model.Endpoint) *endpointv3.LbEndpoint {
	health := corev3.HealthStatus_HEALTHY
	if !e.Healthy {
		health = corev3.HealthStatus_UNHEALTHY
	}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: socketAddress(e.Address, e.Port)}},
		}},
		HealthStatus:        health,
		LoadBalancingWeight: wrapperspb.UInt32(max(e.Weight, 1)),
		Metadata:            endpointMetadata(e),
	}
}

// loadAssignment builds the ClusterLoadAssignment of one cluster: the
// service's endpoints on port that carry the subset labels, grouped by
// locality. Every group has a locality and a weight > 0 (grpc-go rejects or
// ignores groups without them).
func loadAssignment(name string, port uint16, labels map[string]string, eps []model.Endpoint) *endpointv3.ClusterLoadAssignment {
	groups := map[model.Locality]*endpointv3.LocalityLbEndpoints{}
	var order []model.Locality
	for _, e := range eps {
		if e.ServicePort != port || e.DNSName || !e.Matches(labels) {
			continue
		}
		g := groups[e.Locality]
		if g == nil {
			g = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Region: e.Locality.Region, Zone: e.Locality.Zone, SubZone: e.Locality.Subzone}}
			groups[e.Locality] = g
			order = append(order, e.Locality)
		}
		g.LbEndpoints = append(g.LbEndpoints, lbEndpoint(e))
	}
	slices.SortFunc(order, func(a, b model.Locality) int { return strings.Compare(a.String(), b.String()) })
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	for _, l := range order {
		g := groups[l]
		var w uint32
		for _, e := range g.LbEndpoints {
			w += e.GetLoadBalancingWeight().GetValue()
		}
		g.LoadBalancingWeight = wrapperspb.UInt32(max(w, 1))
		cla.Endpoints = append(cla.Endpoints, g)
	}
	return cla
}
