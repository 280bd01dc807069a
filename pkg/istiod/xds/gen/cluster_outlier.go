package gen

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
)

// envoyDefaultConsecutive5xx is Envoy's consecutive_5xx when the rule
// leaves consecutive5xxErrors unset: the proxyless translation uses the
// same number so both kinds of client eject alike.
const envoyDefaultConsecutive5xx = 5

// applyOutlierDetection sets an Envoy cluster's outlier_detection as Istio
// does: success-rate ejection off, consecutive 5xx and gateway errors
// enforced at 100% when their threshold is above 0 (0 turns the check
// off), interval, base ejection time and max ejection percent copied,
// local-origin errors split when asked, and the healthy panic threshold
// set to minHealthPercent (0, panic mode off, unless set).
func applyOutlierDetection(c *clusterv3.Cluster, od *apinet.OutlierDetection) {
	if od == nil {
		return
	}
	out := &clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}
	if e := od.GetConsecutive_5XxErrors(); e != nil {
		out.Consecutive_5Xx = wrapperspb.UInt32(e.GetValue())
		out.EnforcingConsecutive_5Xx = wrapperspb.UInt32(enforcing(e.GetValue()))
	}
	if e := od.GetConsecutiveGatewayErrors(); e != nil {
		out.ConsecutiveGatewayFailure = wrapperspb.UInt32(e.GetValue())
		out.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(enforcing(e.GetValue()))
	}
	out.Interval = od.GetInterval()
	out.BaseEjectionTime = od.GetBaseEjectionTime()
	if p := od.GetMaxEjectionPercent(); p > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(uint32(p))
	}
	if od.GetSplitExternalLocalOriginErrors() {
		out.SplitExternalLocalOriginErrors = true
		if n := od.GetConsecutiveLocalOriginFailures().GetValue(); n > 0 {
			out.ConsecutiveLocalOriginFailure = wrapperspb.UInt32(n)
			out.EnforcingConsecutiveLocalOriginFailure = wrapperspb.UInt32(100)
		}
		out.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(0)
	}
	c.OutlierDetection = out
	if p := od.GetMinHealthPercent(); p >= 0 {
		if c.CommonLbConfig == nil {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
		}
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: float64(p)}
	}
}

// enforcing is the enforcement percentage of a consecutive-errors check.
func enforcing(threshold uint32) uint32 {
	if threshold > 0 {
		return 100
	}
	return 0
}

// applyGRPCOutlierDetection translates outlier detection for grpc-go,
// which ejects only by success rate or by failure percentage (gRFC A50) and
// counts every failed call. Istio's proxyless generator drops the block;
// here "N consecutive errors" becomes "an endpoint that failed more than
// 99% of at least N calls in one interval is ejected": failure-percentage
// ejection with threshold 99, enforced at 100%, request volume N, from a
// single host up (Envoy's consecutive checks need no minimum of hosts).
// N is consecutive5xxErrors (Envoy's default 5 when unset), else
// consecutiveGatewayErrors; 0 for both turns ejection off. Success-rate
// ejection is off, as for Envoy. Interval, base ejection time and max
// ejection percent are copied; minHealthPercent and local-origin splitting
// have no grpc-go counterpart (reported by UnhonouredPolicy).
func applyGRPCOutlierDetection(c *clusterv3.Cluster, od *apinet.OutlierDetection) {
	if od == nil {
		return
	}
	n := uint32(envoyDefaultConsecutive5xx)
	if e := od.GetConsecutive_5XxErrors(); e != nil {
		n = e.GetValue()
	}
	if n == 0 {
		n = od.GetConsecutiveGatewayErrors().GetValue()
	}
	if n == 0 {
		return
	}
	out := &clusterv3.OutlierDetection{
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
		FailurePercentageThreshold:     wrapperspb.UInt32(99),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageRequestVolume: wrapperspb.UInt32(n),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(1),
		Interval:                       od.GetInterval(),
		BaseEjectionTime:               od.GetBaseEjectionTime(),
	}
	if p := od.GetMaxEjectionPercent(); p > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(uint32(min(p, 100)))
	}
	c.OutlierDetection = out
}
