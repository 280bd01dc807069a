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
func providerTLSContext(client bool, trustDomain string) *tlsv3.CommonTlsContext {
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
// trustDomain is the mesh's, which the server's identity must be in.
func withClientTLS(c *clusterv3.Cluster, dr *networking.DestinationRule, subset, trustDomain string) {
	if !istioMutual(dr, subset) {
		return
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: providerTLSContext(true, trustDomain)}),
	}}
}

// grpcInboundListener is the listener a proxyless gRPC server serves with,
// as Istio's grpcgen builds it: its address, and one filter chain
// ("inbound-mtls" with a DownstreamTlsContext requiring client
// certificates, or "inbound-plaintext") chosen by the PeerAuthentication
// mode of the port (see grpcServerMode), whose connection manager runs the
// workload's AuthorizationPolicies as RBAC filters (DENY, then ALLOW) and
// accepts every call. RequestAuthentication is not enforced: grpc-go has
// no JWT filter.
func grpcInboundListener(pc *model.PushContext, _ *model.Scope, p *model.Proxy, name string) *listenerv3.Listener {
	host, portStr, err := net.SplitHostPort(strings.TrimPrefix(name, GRPCInboundPrefix))
	if err != nil {
		return nil
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil
	}
	w := workloadOf(pc, p)
	for _, ra := range pc.Security.RequestAuthenticationsFor(w) {
		reportOnce("RequestAuthentication is not enforced for proxyless gRPC servers (grpc-go has no JWT filter)",
			"policy", ra.Namespace+"/"+ra.Name, "proxy", p.ID)
	}
	mode := grpcServerMode(pc.Security.EffectiveMTLS(w), w.Labels, uint32(port))
	suffix := "plaintext"
	if mode == model.MTLSStrict {
		suffix = "mtls"
	}
	filters := append(rbacHTTPFilters(grpcHTTP, pc.Security.AuthorizationPoliciesFor(w)), routerFilter())
	hcm := &hcmv3.HttpConnectionManager{
		// grpc-go ignores the stat prefix; Envoy's schema requires one.
		StatPrefix: "inbound_" + portStr,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "inbound",
			VirtualHosts: []*routev3.VirtualHost{{Name: "inbound|http|" + portStr, Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: filters,
	}
	chain := &listenerv3.FilterChain{
		Name:    "inbound-" + suffix,
		Filters: []*listenerv3.Filter{{Name: "inbound-hcm" + suffix, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}}},
	}
	if mode == model.MTLSStrict {
		chain.TransportSocket = downstreamTLS(providerTLSContext(false, ""))
	}
	return &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}},
		FilterChains: []*listenerv3.FilterChain{chain},
	}
}
