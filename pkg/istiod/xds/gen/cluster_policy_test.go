package gen

import (
	"testing"

	"google.golang.org/protobuf/proto"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// TestClusterPolicy checks Istio's resolution: a port-level setting
// replaces the top-level policy as a whole, a subset overrides field by
// field, and a subset's port-level setting replaces all four fields.
func TestClusterPolicy(t *testing.T) {
	lb := func(s apinet.LoadBalancerSettings_SimpleLB) *apinet.LoadBalancerSettings {
		return &apinet.LoadBalancerSettings{LbPolicy: &apinet.LoadBalancerSettings_Simple{Simple: s}}
	}
	pool := func(n int32) *apinet.ConnectionPoolSettings {
		return &apinet.ConnectionPoolSettings{Http: &apinet.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: n}}
	}
	od := &apinet.OutlierDetection{Interval: nil, MaxEjectionPercent: 10}
	dr := &networking.DestinationRule{}
	dr.Spec.TrafficPolicy = &apinet.TrafficPolicy{
		LoadBalancer: lb(apinet.LoadBalancerSettings_RANDOM), ConnectionPool: pool(1), OutlierDetection: od,
		PortLevelSettings: []*apinet.TrafficPolicy_PortTrafficPolicy{{Port: &apinet.PortSelector{Number: 81}, ConnectionPool: pool(81)}},
	}
	dr.Spec.Subsets = []*apinet.Subset{
		{Name: "a", TrafficPolicy: &apinet.TrafficPolicy{ConnectionPool: pool(2)}},
		{Name: "b", TrafficPolicy: &apinet.TrafficPolicy{
			LoadBalancer:      lb(apinet.LoadBalancerSettings_ROUND_ROBIN),
			PortLevelSettings: []*apinet.TrafficPolicy_PortTrafficPolicy{{Port: &apinet.PortSelector{Number: 82}, ConnectionPool: pool(82)}},
		}},
	}
	for _, tc := range []struct {
		name   string
		port   uint16
		subset string
		want   *apinet.TrafficPolicy
	}{
		{"top", 80, "", &apinet.TrafficPolicy{LoadBalancer: lb(apinet.LoadBalancerSettings_RANDOM), ConnectionPool: pool(1), OutlierDetection: od}},
		{"top port-level replaces all", 81, "", &apinet.TrafficPolicy{ConnectionPool: pool(81)}},
		{"subset overrides one field", 80, "a", &apinet.TrafficPolicy{LoadBalancer: lb(apinet.LoadBalancerSettings_RANDOM), ConnectionPool: pool(2), OutlierDetection: od}},
		{"subset over top port-level", 81, "a", &apinet.TrafficPolicy{ConnectionPool: pool(2)}},
		{"subset port-level replaces all four", 82, "b", &apinet.TrafficPolicy{ConnectionPool: pool(82)}},
		{"subset without port-level", 80, "b", &apinet.TrafficPolicy{LoadBalancer: lb(apinet.LoadBalancerSettings_ROUND_ROBIN), ConnectionPool: pool(1), OutlierDetection: od}},
		{"unknown subset: the default cluster's", 80, "c", &apinet.TrafficPolicy{LoadBalancer: lb(apinet.LoadBalancerSettings_RANDOM), ConnectionPool: pool(1), OutlierDetection: od}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := proto.Clone(clusterPolicy(dr, tc.port, tc.subset)).(*apinet.TrafficPolicy)
			got.PortLevelSettings = nil // the top-level policy itself keeps them; they are resolved already
			if !proto.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if clusterPolicy(nil, 80, "") != nil {
		t.Error("no rule: want no policy")
	}
}
