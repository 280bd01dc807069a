package gen

import (
	"fmt"
	"strconv"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// The transport protocols the TLS inspector reports, and the ALPN values
// of Istio's filter chain matches.
const (
	transportTLS = "tls"
	transportRaw = "raw_buffer"
)

var (
	alpnIstioHTTP   = []string{"istio-http/1.0", "istio-http/1.1", "istio-h2"}
	alpnIstioTCP    = []string{"istio-peer-exchange", "istio"}
	alpnIstioAll    = []string{"istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
	alpnPlainHTTP   = []string{"http/1.0", "http/1.1", "h2c"}
	alpnServerHTTP  = []string{"h2", "http/1.1"}
	alpnServerTCP   = []string{"istio-peer-exchange", "h2", "http/1.1"}
	inboundCiphers  = []string{"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-GCM-SHA256"}
	protocolUnknown = model.Protocol("")
)

// chainMatch is one filter chain of a port: what it matches, whether it
// speaks HTTP, and whether it terminates mutual TLS.
type chainMatch struct {
	alpn      []string
	transport string
	http      bool
	tls       bool
}

// chainMatches are the filter chains of a port, as Istio lays them out for
// each mTLS mode and protocol (protocolUnknown: the passthrough chains,
// which detect HTTP).
func chainMatches(mode model.MTLSMode, p model.Protocol) []chainMatch {
	http, auto := p.IsHTTP(), p == protocolUnknown
	switch mode {
	case model.MTLSStrict:
		switch {
		case auto:
			return []chainMatch{{alpnIstioHTTP, transportTLS, true, true}, {nil, transportTLS, false, true}}
		case http:
			return []chainMatch{{nil, transportTLS, true, true}}
		}
		return []chainMatch{{nil, transportTLS, false, true}}
	case model.MTLSPermissive:
		switch {
		case auto:
			return []chainMatch{{alpnIstioHTTP, transportTLS, true, true}, {alpnPlainHTTP, transportRaw, true, false},
				{alpnIstioTCP, transportTLS, false, true}, {nil, transportRaw, false, false}, {nil, transportTLS, false, false}}
		case http:
			return []chainMatch{{alpnIstioAll, transportTLS, true, true}, {nil, transportRaw, true, false}}
		}
		return []chainMatch{{alpnIstioAll, transportTLS, false, true}, {nil, transportTLS, false, false}, {nil, transportRaw, false, false}}
	}
	if auto {
		return []chainMatch{{alpnPlainHTTP, transportRaw, true, false}, {nil, transportRaw, false, false}}
	}
	return []chainMatch{{nil, transportRaw, http, false}}
}

// inboundTLS terminates Istio mutual TLS with the workload certificate
// and roots from the agent's SDS server, requiring a client certificate.
func inboundTLS(http bool) *corev3.TransportSocket {
	alpn := alpnServerTCP
	if http {
		alpn = alpnServerHTTP
	}
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			CipherSuites:              inboundCiphers,
		},
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(certName, true)},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
			ValidationContextSdsSecretConfig: sdsSecret(rootCertName, true),
		}},
	}
	return downstreamTLS(common, alpn...)
}

// inboundSecurity is what every chain of one workload shares.
type inboundSecurity struct {
	authz model.AuthorizationPolicies
	jwt   *hcmv3.HttpFilter
	mesh  *meshconfig.MeshConfig // for sidecarHCM
	logs  []*accesslogv3.AccessLog
}

// portChains builds the chains of one workload port (port 0 with
// protocolUnknown: the passthrough chains).
func (s *inboundSecurity) portChains(ip inboundPort, mode model.MTLSMode) []*listenerv3.FilterChain {
	port, proto := ip.port, ip.protocol
	cluster, name, httpName, stat := model.InboundClusterName(port), fmt.Sprintf("0.0.0.0_%d", port), fmt.Sprintf("0.0.0.0_%d", port), "inbound_0.0.0.0_"+fmt.Sprint(port)
	if port == 0 {
		cluster, name, httpName, stat = InboundPassthroughCluster, VirtualInbound, VirtualInbound+"-catchall-http", InboundPassthroughCluster
	}
	var out []*listenerv3.FilterChain
	for _, m := range chainMatches(mode, proto) {
		fc := &listenerv3.FilterChain{Name: name, FilterChainMatch: &listenerv3.FilterChainMatch{
			TransportProtocol: m.transport, ApplicationProtocols: m.alpn}}
		if port != 0 {
			fc.FilterChainMatch.DestinationPort = wrapperspb.UInt32(uint32(port))
		}
		if m.http {
			fc.Name = httpName
			fc.Filters = []*listenerv3.Filter{hcmFilter(s.inboundHCM(ip, cluster, stat))}
		} else {
			fc.Filters = append(rbacNetworkFilters(s.authz), s.tcpProxy(cluster))
		}
		if m.tls {
			fc.TransportSocket = inboundTLS(m.http)
		}
		out = append(out, fc)
	}
	return out
}

func (s *inboundSecurity) tcpProxy(cluster string) *listenerv3.Filter {
	return tcpProxyFilter(&tcpv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}, AccessLog: s.logs})
}

// inboundHCM is the connection manager of an inbound HTTP chain: JWT
// authentication, RBAC, fault and CORS (as Istio, for configuration
// that may name them), then the router to the inbound cluster; the client
// certificate's identity goes to the application in
// x-forwarded-client-cert. Its one route is Istio's: named after the
// service port, no timeout, requests the application reset before taking
// them retried twice (not gRPC's, whose streams would not bear it).
func (s *inboundSecurity) inboundHCM(ip inboundPort, cluster, stat string) *hcmv3.HttpConnectionManager {
	var filters []*hcmv3.HttpFilter
	if s.jwt != nil {
		filters = append(filters, s.jwt)
	}
	filters = append(filters, rbacHTTPFilters(envoyHTTP, s.authz)...)
	filters = append(filters, faultFilter(), corsFilter(), routerFilter())
	vhost := fmt.Sprintf("inbound|http|%d", ip.svcPort)
	action := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}, Timeout: durationpb.New(0),
		MaxStreamDuration: &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(0), GrpcTimeoutHeaderMax: durationpb.New(0)}}
	if ip.protocol != model.ProtocolGRPC {
		action.RetryPolicy = &routev3.RetryPolicy{RetryOn: "reset-before-request", NumRetries: wrapperspb.UInt32(2)}
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:               stat + statDelimiter,
		ForwardClientCertDetails: hcmv3.HttpConnectionManager_APPEND_FORWARD,
		SetCurrentClientCertDetails: &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Uri: true, Dns: true,
		},
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: cluster,
			VirtualHosts: []*routev3.VirtualHost{{
				Name: vhost, Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Name:      "default",
					Match:     &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action:    &routev3.Route_Route{Route: action},
					Decorator: &routev3.Decorator{Operation: ip.host + ":" + strconv.Itoa(int(ip.svcPort)) + "/*"},
				}},
			}},
			ValidateClusters: wrapperspb.Bool(false),
		}},
		HttpFilters: filters,
	}
	if ip.protocol.IsHTTP2() {
		h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{}
	}
	return sidecarHCM(h, s.mesh, s.logs, true)
}
