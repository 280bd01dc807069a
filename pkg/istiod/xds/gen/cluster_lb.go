package gen

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
)

// defaultRingSize is the minimum ring size Istio sets when a consistent
// hash names neither ringHash nor maglev (Envoy's own default).
const defaultRingSize = 1024

// applyLoadBalancer sets an Envoy cluster's lb_policy and lb_config from
// loadBalancer, as Istio does: LEAST_REQUEST when nothing is set, the
// warmup window on ROUND_ROBIN and LEAST_REQUEST, PASSTHROUGH turning the
// cluster into an ORIGINAL_DST one, and a consistent hash overriding the
// simple policy with RING_HASH or MAGLEV. Clusters that already pick their
// own hosts (ORIGINAL_DST) keep CLUSTER_PROVIDED.
func applyLoadBalancer(c *clusterv3.Cluster, lb *apinet.LoadBalancerSettings) {
	if c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		return
	}
	// As Istio: the endpoints of unready pods are sent as unhealthy, so
	// Envoy's panic mode (at 50% healthy by default) would send them
	// traffic; it is off unless outlier detection's minHealthPercent set it.
	if c.CommonLbConfig == nil {
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
	}
	if c.CommonLbConfig.HealthyPanicThreshold == nil {
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{}
	}
	switch lb.GetSimple() {
	case apinet.LoadBalancerSettings_LEAST_CONN, apinet.LoadBalancerSettings_LEAST_REQUEST:
		leastRequest(c, lb)
	case apinet.LoadBalancerSettings_RANDOM:
		c.LbPolicy = clusterv3.Cluster_RANDOM
	case apinet.LoadBalancerSettings_ROUND_ROBIN:
		roundRobin(c, lb)
	case apinet.LoadBalancerSettings_PASSTHROUGH:
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		c.LoadAssignment, c.EdsClusterConfig = nil, nil
		return
	default:
		leastRequest(c, lb)
	}
	consistentHash(c, lb.GetConsistentHash(), false)
}

func roundRobin(c *clusterv3.Cluster, lb *apinet.LoadBalancerSettings) {
	c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	if s := slowStart(lb); s != nil {
		c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{SlowStartConfig: s}}
	}
}

func leastRequest(c *clusterv3.Cluster, lb *apinet.LoadBalancerSettings) {
	c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	if s := slowStart(lb); s != nil {
		c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{SlowStartConfig: s}}
	}
}

// slowStart is the warmup of newly added endpoints: warmup (aggression 1
// and minimum 10% by default, the runtime key "(" as Istio writes it: a
// key no runtime has, so the default always applies) or the deprecated
// warmupDurationSecs (the window alone).
func slowStart(lb *apinet.LoadBalancerSettings) *clusterv3.Cluster_SlowStartConfig {
	if w := lb.GetWarmup(); w != nil {
		aggression, minPercent := 1.0, 10.0
		if a := w.GetAggression(); a != nil {
			aggression = a.GetValue()
		}
		if m := w.GetMinimumPercent(); m != nil {
			minPercent = m.GetValue()
		}
		return &clusterv3.Cluster_SlowStartConfig{
			SlowStartWindow:  w.GetDuration(),
			Aggression:       &corev3.RuntimeDouble{DefaultValue: aggression, RuntimeKey: "("},
			MinWeightPercent: &typev3.Percent{Value: minPercent},
		}
	}
	if d := lb.GetWarmupDurationSecs(); d != nil {
		return &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: d}
	}
	return nil
}

// consistentHash applies the cluster half of a consistent hash (the route
// carries the hash policy): MAGLEV with its table size, RING_HASH with its
// minimum ring size, or, when the rule names neither, RING_HASH with the
// deprecated minimumRingSize (1024 when unset). gRPC clients have no
// Maglev: they get RING_HASH, the other consistent hash they implement
// (reported as not honoured by UnhonouredPolicy).
func consistentHash(c *clusterv3.Cluster, ch *apinet.LoadBalancerSettings_ConsistentHashLB, grpc bool) {
	if ch == nil {
		return
	}
	switch {
	case ch.GetMaglev() != nil && !grpc:
		c.LbPolicy, c.LbConfig = clusterv3.Cluster_MAGLEV, nil
		if n := ch.GetMaglev().GetTableSize(); n != 0 {
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(n)}}
		}
	case ch.GetMaglev() != nil:
		c.LbPolicy, c.LbConfig = clusterv3.Cluster_RING_HASH, nil
	case ch.GetRingHash() != nil:
		c.LbPolicy, c.LbConfig = clusterv3.Cluster_RING_HASH, nil
		if n := ch.GetRingHash().GetMinimumRingSize(); n != 0 {
			c.LbConfig = ringHashConfig(n)
		}
	default:
		n := uint64(defaultRingSize)
		if m := ch.GetMinimumRingSize(); m != 0 { //nolint:staticcheck // deprecated, still honoured as Istio does
			n = m
		}
		c.LbPolicy, c.LbConfig = clusterv3.Cluster_RING_HASH, ringHashConfig(n)
	}
}

func ringHashConfig(minSize uint64) *clusterv3.Cluster_RingHashLbConfig_ {
	return &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(minSize)}}
}

// applyGRPCLoadBalancer sets a proxyless client's lb_policy: grpc-go takes
// ROUND_ROBIN (its default, also for an unset policy), LEAST_REQUEST and
// RING_HASH, and NACKs a cluster with any other. A consistent hash wins over
// the simple policy, as in Istio's proxyless generator; RANDOM and
// PASSTHROUGH stay ROUND_ROBIN (reported by UnhonouredPolicy).
func applyGRPCLoadBalancer(c *clusterv3.Cluster, lb *apinet.LoadBalancerSettings) {
	c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	if ch := lb.GetConsistentHash(); ch != nil {
		consistentHash(c, ch, true)
		return
	}
	switch lb.GetSimple() {
	case apinet.LoadBalancerSettings_LEAST_REQUEST, apinet.LoadBalancerSettings_LEAST_CONN:
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	}
}
