package gen

import (
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Istio's listener names and ports.
const (
	VirtualOutbound     = "virtualOutbound"
	VirtualInbound      = "virtualInbound"
	VirtualOutboundPort = 15001
	VirtualInboundPort  = 15006
)

func address(ip string, port uint16) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: socketAddress(ip, port)}}
}

func routerFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}
}

// hcmFilter wraps a connection manager in a network filter.
func hcmFilter(h *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(h)}}
}

// sidecarHTTPFilters are the HTTP filters of Envoy's connection managers:
// fault and CORS (configured per route), then the router, as Istio
// orders them.
func sidecarHTTPFilters() []*hcmv3.HttpFilter {
	return []*hcmv3.HttpFilter{faultFilter(), corsFilter(), routerFilter()}
}

// grpcHTTPFilters are those of gRPC clients, which know fault injection
// but not CORS.
func grpcHTTPFilters() []*hcmv3.HttpFilter {
	return []*hcmv3.HttpFilter{faultFilter(), routerFilter()}
}

// rdsManager is an outbound connection manager fetching route config name
// through filters.
func rdsManager(statPrefix, routeName string, filters []*hcmv3.HttpFilter) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routeName,
		}},
		HttpFilters: filters,
	}
}

// tcpFilter proxies TCP to cluster, logging connections as b.logs say.
func (b *routeBuilder) tcpFilter(cluster string) *listenerv3.Filter {
	return tcpProxyFilter(&tcpv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}, AccessLog: b.logs})
}

// blackHoleFilter drops connections, unlogged, as Istio's blackhole chains.
func blackHoleFilter() *listenerv3.Filter {
	return tcpProxyFilter(&tcpv3.TcpProxy{StatPrefix: BlackHoleCluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: BlackHoleCluster}})
}

func tcpProxyFilter(p *tcpv3.TcpProxy) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(p)}}
}

// outboundListeners builds virtualOutbound and the per-port listeners for
// the services of a scope, as its sidecars with labels see them, in the
// mesh config mesh: HTTP ports share 0.0.0.0_PORT (routes by port
// name over RDS), reached from virtualOutbound through use_original_dst;
// TCP and TLS ports with a VIP get VIP_PORT (their tcp / tls routes) and a
// filter chain in virtualOutbound; destinations nothing matches go where
// the scope's outbound traffic policy says.
func outboundListeners(sc *model.Scope, labels map[string]string, mesh *meshconfig.MeshConfig) []*listenerv3.Listener {
	b := &routeBuilder{scope: sc, labels: labels, logs: accessLogs(mesh)}
	var perPort []*listenerv3.Listener
	httpPorts := map[uint16]bool{}
	seen := map[string]bool{}
	var chains []*listenerv3.FilterChain
	for _, svc := range sc.Services {
		if svc.Resolution == model.Passthrough && len(svc.Addresses) == 0 {
			continue
		}
		for _, p := range svc.Ports {
			if p.Protocol.IsHTTP() {
				if !httpPorts[p.Port] {
					httpPorts[p.Port] = true
					name := fmt.Sprintf("0.0.0.0_%d", p.Port)
					perPort = append(perPort, &listenerv3.Listener{
						Name: name, Address: address("0.0.0.0", p.Port), BindToPort: wrapperspb.Bool(false),
						TrafficDirection: corev3.TrafficDirection_OUTBOUND,
						FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
							hcmFilter(sidecarHCM(rdsManager("outbound_"+name+statDelimiter, fmt.Sprint(p.Port), sidecarHTTPFilters()), mesh, b.logs, false))}}},
					})
				}
				continue // reached from virtualOutbound through use_original_dst
			}
			opaque := b.opaqueChains(svc, p)
			for _, vip := range svc.Addresses {
				key := fmt.Sprintf("%s_%d", vip, p.Port)
				if seen[key] {
					continue
				}
				seen[key] = true
				l := &listenerv3.Listener{
					Name: key, Address: address(vip, p.Port), BindToPort: wrapperspb.Bool(false),
					TrafficDirection: corev3.TrafficDirection_OUTBOUND,
					FilterChains:     opaque,
				}
				if needsTLSInspector(opaque) {
					l.ListenerFilters = []*listenerv3.ListenerFilter{tlsInspector()}
				}
				perPort = append(perPort, l)
				// virtualOutbound hands connections to VIP_PORT (use_original_dst);
				// its own chain for the VIP takes the first route.
				chains = append(chains, &listenerv3.FilterChain{
					Name:             key,
					FilterChainMatch: &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr(vip)}, DestinationPort: wrapperspb.UInt32(uint32(p.Port))},
					Filters:          opaque[0].Filters,
				})
			}
		}
	}
	// Connections to 15001 itself would come back here through the
	// passthrough: Istio blackholes them.
	chains = append(chains, &listenerv3.FilterChain{Name: VirtualOutbound + "-blackhole",
		FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(VirtualOutboundPort)},
		Filters:          []*listenerv3.Filter{blackHoleFilter()}})
	vo := &listenerv3.Listener{
		Name:             VirtualOutbound,
		Address:          address("0.0.0.0", VirtualOutboundPort),
		UseOriginalDst:   wrapperspb.Bool(true),
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains:     chains,
		DefaultFilterChain: &listenerv3.FilterChain{Name: "PassthroughFilterChain",
			Filters: []*listenerv3.Filter{b.tcpFilter(outboundCatchAll(sc))}},
		AccessLog: listenerLogs(b.logs),
	}
	return append([]*listenerv3.Listener{vo}, perPort...)
}

func cidr(ip string) *corev3.CidrRange {
	bits := uint32(32)
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		bits = 128
	}
	return &corev3.CidrRange{AddressPrefix: ip, PrefixLen: wrapperspb.UInt32(bits)}
}

// inboundPort is one port the proxy's workload serves.
type inboundPort struct {
	port     uint16 // workload (target) port
	protocol model.Protocol
	// svcPort and host are the port and host name of the first service
	// that names port, for the names Istio gives the inbound route.
	svcPort uint16
	host    string
}
