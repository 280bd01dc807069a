package gen

import (
	"fmt"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// UnhonouredPolicy lists the traffic policy fields of a DestinationRule
// that the cluster generator does not honour, or honours only in part,
// for Envoy sidecars (grpc false) or proxyless gRPC clients (grpc true):
// one "path: reason" per field set, paths as in the rule
// ("subsets[1].trafficPolicy.portLevelSettings[0].loadBalancer.simple").
// Locality load balancing is not listed (reported with the endpoint
// generator's), nor consistentHash's hash key (the route carries it).
func UnhonouredPolicy(dr *networking.DestinationRule, grpc bool) []string {
	if dr == nil {
		return nil
	}
	var out []string
	add := func(path, reason string) { out = append(out, path+": "+reason) }
	visit := func(path string, tp *apinet.TrafficPolicy) {
		if tp == nil {
			return
		}
		policyProblems(path, tp, grpc, add)
		for i, p := range tp.GetPortLevelSettings() {
			policyProblems(fmt.Sprintf("%s.portLevelSettings[%d]", path, i), &apinet.TrafficPolicy{
				ConnectionPool: p.GetConnectionPool(), LoadBalancer: p.GetLoadBalancer(),
				OutlierDetection: p.GetOutlierDetection(), Tls: p.GetTls(),
			}, grpc, add)
		}
	}
	visit("trafficPolicy", dr.Spec.GetTrafficPolicy())
	for i, s := range dr.Spec.GetSubsets() {
		visit(fmt.Sprintf("subsets[%d].trafficPolicy", i), s.GetTrafficPolicy())
	}
	return out
}

func policyProblems(path string, tp *apinet.TrafficPolicy, grpc bool, add func(path, reason string)) {
	lb, od, tls := tp.GetLoadBalancer(), tp.GetOutlierDetection(), tp.GetTls()
	if tp.GetTunnel() != nil {
		add(path+".tunnel", "not translated")
	}
	if lb.GetZoneAwareLbSetting() != nil {
		add(path+".loadBalancer.zoneAwareLbSetting", "not translated")
	}
	if lb.GetBackendUtilization() != nil {
		add(path+".loadBalancer.backendUtilization", "not translated")
	}
	if len(od.GetOutlierDetectionHttpErrorCodes()) > 0 {
		add(path+".outlierDetection.outlierDetectionHttpErrorCodes", "not translated")
	}
	if od.GetFailurePercentageThreshold() != nil {
		add(path+".outlierDetection.failurePercentageThreshold", "not translated")
	}
	if grpc {
		grpcProblems(path, tp, add)
		return
	}
	if n := tls.GetCredentialName(); n != "" {
		add(path+".tls.credentialName", fmt.Sprintf("%q is not read by sidecars: the cluster has no TLS (as in Istio for rules without a workloadSelector)", n))
	} else if tls.GetMode() == apinet.ClientTLSSettings_MUTUAL && (tls.GetClientCertificate() == "" || tls.GetPrivateKey() == "") {
		add(path+".tls", "MUTUAL needs clientCertificate and privateKey: the cluster has no TLS")
	}
	if tls.GetCaCertCredentialName() != "" {
		add(path+".tls.caCertCredentialName", "not read by sidecars")
	}
}

// grpcProblems lists what grpc-go cannot do of a policy.
func grpcProblems(path string, tp *apinet.TrafficPolicy, add func(path, reason string)) {
	lb, cp, od, tls := tp.GetLoadBalancer(), tp.GetConnectionPool(), tp.GetOutlierDetection(), tp.GetTls()
	switch lb.GetSimple() {
	case apinet.LoadBalancerSettings_RANDOM, apinet.LoadBalancerSettings_PASSTHROUGH:
		if lb.GetConsistentHash() == nil {
			add(path+".loadBalancer.simple", lb.GetSimple().String()+" is not implemented by gRPC clients: ROUND_ROBIN")
		}
	}
	if lb.GetConsistentHash().GetMaglev() != nil {
		add(path+".loadBalancer.consistentHash.maglev", "gRPC clients have no Maglev: RING_HASH (default ring size)")
	}
	if lb.GetWarmup() != nil || lb.GetWarmupDurationSecs() != nil {
		add(path+".loadBalancer.warmup", "gRPC clients have no slow start")
	}
	if tp.GetRetryBudget() != nil {
		add(path+".retryBudget", "gRPC clients have no retry budget")
	}
	if tp.GetProxyProtocol() != nil {
		add(path+".proxyProtocol", "gRPC clients send no PROXY header")
	}
	if cp.GetTcp() != nil {
		add(path+".connectionPool.tcp", "gRPC clients honour only http.http2MaxRequests")
	}
	if h := cp.GetHttp(); h != nil && (h.GetHttp1MaxPendingRequests() != 0 || h.GetMaxRetries() != 0 || h.GetMaxRequestsPerConnection() != 0 ||
		h.GetIdleTimeout() != nil || h.GetH2UpgradePolicy() != apinet.ConnectionPoolSettings_HTTPSettings_DEFAULT || h.GetUseClientProtocol() ||
		h.GetMaxConcurrentStreams() != 0 || h.GetHttp2KeepAlive() != nil) {
		add(path+".connectionPool.http", "gRPC clients honour only http2MaxRequests")
	}
	if od != nil {
		add(path+".outlierDetection", "gRPC clients eject by failure percentage: consecutive errors become more than 99% failed calls of at least that many calls in an interval")
		if od.GetMinHealthPercent() != 0 {
			add(path+".outlierDetection.minHealthPercent", "gRPC clients have no panic threshold")
		}
		if od.GetSplitExternalLocalOriginErrors() || od.GetConsecutiveLocalOriginFailures() != nil {
			add(path+".outlierDetection.splitExternalLocalOriginErrors", "gRPC clients do not tell local-origin failures apart")
		}
	}
	switch tls.GetMode() {
	case apinet.ClientTLSSettings_SIMPLE, apinet.ClientTLSSettings_MUTUAL:
		add(path+".tls.mode", tls.GetMode().String()+" is not implemented for gRPC clients (as in Istio): plaintext")
	case apinet.ClientTLSSettings_ISTIO_MUTUAL:
		if tls.GetSni() != "" || len(tls.GetSubjectAltNames()) > 0 {
			add(path+".tls", "gRPC clients send no SNI and check only that the server is in the trust domain")
		}
	}
}
