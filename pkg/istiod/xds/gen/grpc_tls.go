package gen

import (
	"net"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// GRPCInboundPrefix starts the names of the listeners proxyless gRPC servers
// ask for (grpc-go's server_listener_resource_name_template, as Istio's
// agent writes it): the rest is the server's listening "host:port".
const GRPCInboundPrefix = "xds.istio.io/grpc/lds/inbound/"

// The certificate provider instance grpc-go reads the agent's files through
// (the bootstrap's certificate_providers), and its two certificates.
const (
	// trustDomain is the identities' trust domain (the CA's default).
	trustDomain  = "cluster.local"
	certProvider = "default"
	certName     = "default"
	rootCertName = "ROOTCA"
)

// istioMutual reports whether a DestinationRule asks for Istio mutual TLS on
// a subset (its own policy first, then the rule's).
func istioMutual(dr *networking.DestinationRule, subset string) bool {
	if dr == nil {
		return false
	}
	for _, s := range dr.Spec.GetSubsets() {
		if s.GetName() == subset && subset != "" {
			if tls := s.GetTrafficPolicy().GetTls(); tls != nil {
				return tls.GetMode() == apinet.ClientTLSSettings_ISTIO_MUTUAL
			}
		}
	}
	return dr.Spec.GetTrafficPolicy().GetTls().GetMode() == apinet.ClientTLSSettings_ISTIO_MUTUAL
}

// providerTLSContext presents the workload certificate and trusts the mesh
// roots, both from the certificate provider. A client also checks that the
// server's identity is in the trust domain (grpc-go servers take no SAN match).
func providerTLSContext(client bool) *tlsv3.CommonTlsContext {
	vc := &tlsv3.CertificateValidationContext{
		CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: certProvider, CertificateName: rootCertName},
	}
	if client {
		vc.MatchSubjectAltNames = []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://" + trustDomain + "/"}}}
	}
	return &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: certProvider, CertificateName: certName},
		ValidationContextType:          &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
	}
}

// withClientTLS adds Istio mutual TLS, through the certificate provider, to
// a proxyless client's cluster when its DestinationRule asks for it.
func withClientTLS(c *clusterv3.Cluster, dr *networking.DestinationRule, subset string) {
	if !istioMutual(dr, subset) {
		return
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: providerTLSContext(true)}),
	}}
}

// grpcInboundListener is the listener a proxyless gRPC server serves with:
// its address, one filter chain whose routes accept every call, and mutual
// TLS required when a DestinationRule for a service this workload backs asks
// clients for ISTIO_MUTUAL on this port (so both sides agree). Without that
// the server accepts plaintext.
func grpcInboundListener(pc *model.PushContext, sc *model.Scope, p *model.Proxy, name string) *listenerv3.Listener {
	host, portStr, err := net.SplitHostPort(strings.TrimPrefix(name, GRPCInboundPrefix))
	if err != nil {
		return nil
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "inbound_" + portStr,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "inbound|" + portStr,
			VirtualHosts: []*routev3.VirtualHost{{Name: "inbound|" + portStr, Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{routerFilter()},
	}
	chain := &listenerv3.FilterChain{
		Name:    "inbound|" + portStr,
		Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}}},
	}
	if mtlsInbound(pc, sc, p, uint16(port)) {
		chain.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: mustAny(&tlsv3.DownstreamTlsContext{
				CommonTlsContext:         providerTLSContext(false),
				RequireClientCertificate: wrapperspb.Bool(true),
			}),
		}}
	}
	return &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}},
		FilterChains: []*listenerv3.FilterChain{chain},
	}
}

// mtlsInbound reports whether clients of a service backed by the proxy's
// workload on port are told to use ISTIO_MUTUAL.
func mtlsInbound(pc *model.PushContext, sc *model.Scope, p *model.Proxy, port uint16) bool {
	for host, eps := range pc.Endpoints {
		for _, ep := range eps {
			if ep.Address != p.IP || ep.Port != port {
				continue
			}
			dr := sc.DestinationRule[host]
			if istioMutual(dr, "") {
				return true
			}
			for _, s := range subsetsOf(dr) {
				if matches(s.GetLabels(), ep.Labels) && istioMutual(dr, s.GetName()) {
					return true
				}
			}
		}
	}
	return false
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
