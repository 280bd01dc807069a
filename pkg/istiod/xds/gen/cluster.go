package gen

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Names of Istio's fixed clusters.
const (
	BlackHoleCluster          = "BlackHoleCluster"
	PassthroughCluster        = "PassthroughCluster"
	InboundPassthroughCluster = "InboundPassthroughCluster"
)

const (
	defaultConnectTimeout = 10 * time.Second
	// statDelimiter ends the stat names Istio gives clusters
	// (alt_stat_name), where its bootstrap's tag rules find their end.
	statDelimiter = ";"
	// inboundBindAddress is the source address of inbound connections to the
	// app, so its own outbound capture can tell them apart (as Istio).
	inboundBindAddress = "127.0.0.6"
	httpOptionsKey     = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		InitialFetchTimeout:   durationpb.New(0), // as Istio: wait for the resource, however long
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// subsetsOf returns the subsets of a DestinationRule (nil rule: none).
func subsetsOf(dr *networking.DestinationRule) []*apinet.Subset {
	if dr == nil {
		return nil
	}
	return dr.Spec.GetSubsets()
}

// subsetLabels returns the labels of subset name, and whether it exists.
func subsetLabels(dr *networking.DestinationRule, name string) (map[string]string, bool) {
	if name == "" {
		return nil, true
	}
	for _, s := range subsetsOf(dr) {
		if s.GetName() == name {
			return s.GetLabels(), true
		}
	}
	return nil, false
}

// outboundClusters builds the clusters of one service port: the default
// cluster and one per DestinationRule subset, each with its traffic policy
// resolved as Istio resolves it (port-level settings, then the subset's).
// grpc builds them for proxyless gRPC clients (their TLS is added by the
// caller). Auto mTLS takes every service's namespace as PERMISSIVE; use
// outboundClustersIn to honour PeerAuthentication.
func outboundClusters(svc *model.Service, port model.Port, dr *networking.DestinationRule, eps []model.Endpoint, grpc bool) []*clusterv3.Cluster {
	return outboundClustersIn(nil, svc, port, dr, eps, grpc)
}

// outboundClustersIn is outboundClusters with the push's security
// policies: auto mTLS is off for a service whose namespace (or, without
// one there, the mesh) has a PeerAuthentication in DISABLE mode, as Istio.
func outboundClustersIn(sec *model.SecurityPolicies, svc *model.Service, port model.Port, dr *networking.DestinationRule, eps []model.Endpoint, grpc bool) []*clusterv3.Cluster {
	mode := sec.EffectiveMTLS(model.Workload{Namespace: svc.Namespace}).Mode
	build := func(subset string, labels map[string]string) *clusterv3.Cluster {
		return outboundCluster(svc, port, subset, labels, clusterPolicy(dr, port.Port, subset), eps, grpc, mode, sec)
	}
	out := []*clusterv3.Cluster{build("", nil)}
	for _, s := range subsetsOf(dr) {
		out = append(out, build(s.GetName(), s.GetLabels()))
	}
	return out
}

// portEndpoints are the endpoints of eps on service port that carry labels.
func portEndpoints(eps []model.Endpoint, port uint16, labels map[string]string) []model.Endpoint {
	var out []model.Endpoint
	for _, e := range eps {
		if e.ServicePort == port && e.Matches(labels) {
			out = append(out, e)
		}
	}
	return out
}

func outboundCluster(svc *model.Service, port model.Port, subset string, labels map[string]string, policy *apinet.TrafficPolicy, eps []model.Endpoint, grpc bool, nsMode model.MTLSMode, sec *model.SecurityPolicies) *clusterv3.Cluster {
	name := model.ClusterName(port.Port, subset, svc.Hostname)
	c := &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(defaultConnectTimeout)}
	if !grpc {
		c.AltStatName = name + statDelimiter
	}
	switch svc.Resolution {
	case model.Passthrough:
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
	case model.DNSLB:
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		c.DnsLookupFamily = clusterv3.Cluster_V4_ONLY
		c.LoadAssignment = dnsAssignment(name, portEndpoints(eps, port.Port, labels))
	default:
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
		c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: name}
	}
	if grpc {
		if t := policy.GetConnectionPool().GetTcp().GetConnectTimeout(); t != nil && t.AsDuration() > 0 {
			c.ConnectTimeout = durationpb.New(t.AsDuration())
		}
		if svc.Resolution != model.Passthrough {
			applyGRPCLoadBalancer(c, policy.GetLoadBalancer())
		}
		applyGRPCCircuitBreakers(c, policy.GetConnectionPool())
		applyGRPCOutlierDetection(c, policy.GetOutlierDetection())
		return c
	}
	b := &envoyCluster{c: c}
	if port.Protocol.IsHTTP2() {
		b.setH2()
	}
	if shouldH2Upgrade(policy.GetConnectionPool()) {
		b.setH2()
	}
	applyConnectionPool(b, policy.GetConnectionPool(), policy.GetRetryBudget())
	applyOutlierDetection(c, policy.GetOutlierDetection())
	applyLoadBalancer(c, policy.GetLoadBalancer())
	// A problem leaves the cluster without TLS, as in Istio; UnhonouredPolicy
	// reports it.
	_ = applyTLS(b, clusterTLS{svc: svc, port: port.Port, subset: subset, policy: policy, eps: portEndpoints(eps, port.Port, labels), nsMode: nsMode,
		trustDomain: sec.Domain(), autoMTLSOn: sec.AutoMTLSEnabled()})
	applyProxyProtocol(c, policy.GetProxyProtocol())
	return b.finish()
}

// dnsAssignment lists the host names a STRICT_DNS cluster resolves (eps:
// the cluster's endpoints on port).
func dnsAssignment(name string, eps []model.Endpoint) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for _, e := range eps {
		lbs = append(lbs, lbEndpoint(e))
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{Locality: &corev3.Locality{}, LbEndpoints: lbs}}
	}
	return cla
}

// fixedClusters are Istio's BlackHole, Passthrough and InboundPassthrough.
func fixedClusters() []*clusterv3.Cluster {
	return []*clusterv3.Cluster{
		{
			Name:                 BlackHoleCluster,
			ConnectTimeout:       durationpb.New(defaultConnectTimeout),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: BlackHoleCluster},
		},
		originalDst(PassthroughCluster, ""),
		originalDst(InboundPassthroughCluster, inboundBindAddress),
	}
}

func originalDst(name, bind string) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(defaultConnectTimeout),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
	}
	if bind != "" {
		c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: socketAddress(bind, 0)}
	}
	return c
}

// inboundCluster forwards to the app on its own port, from 127.0.0.6.
func inboundCluster(port uint16) *clusterv3.Cluster {
	return originalDst(model.InboundClusterName(port), inboundBindAddress)
}

func socketAddress(addr string, port uint16) *corev3.SocketAddress {
	return &corev3.SocketAddress{Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}
}
