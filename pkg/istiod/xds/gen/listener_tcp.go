package gen

import (
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// tlsInspector reads the SNI of connections for filter chain matches.
func tlsInspector() *listenerv3.ListenerFilter {
	return &listenerv3.ListenerFilter{Name: "envoy.filters.listener.tls_inspector",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})}}
}

func isTLS(p model.Protocol) bool { return p == model.ProtocolTLS || p == model.ProtocolHTTPS }

// opaqueChains are the filter chains of a non-HTTP service port (matching
// neither its VIP nor its port: the listener has those): the
// VirtualService's tls routes (by SNI) for TLS and HTTPS ports, its tcp
// routes otherwise, as Istio builds them; without any that apply, one
// chain to the service.
func (b *routeBuilder) opaqueChains(svc *model.Service, port model.Port) []*listenerv3.FilterChain {
	vs := b.scope.VirtualService[svc.Hostname]
	var out []*listenerv3.FilterChain
	if isTLS(port.Protocol) {
		out = b.tlsChains(vs, svc, port.Port)
	} else {
		out = b.tcpChains(vs, svc, port.Port)
	}
	if out == nil {
		out = []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{b.tcpFilter(model.ClusterName(port.Port, "", svc.Hostname))}}}
	}
	return out
}

// tcpChains follows Istio: routes in order; a route (or match) without
// destination subnets ends the list, one with subnets gets a chain
// matching them. nil when no route applies.
func (b *routeBuilder) tcpChains(vs *networking.VirtualService, svc *model.Service, port uint16) []*listenerv3.FilterChain {
	if vs == nil {
		return nil
	}
	var out []*listenerv3.FilterChain
	terminal := false
	for _, tr := range vs.Spec.GetTcp() {
		if len(tr.GetRoute()) == 0 {
			continue
		}
		f := b.tcpProxy(tr.GetRoute(), vs, svc, port)
		if len(tr.GetMatch()) == 0 {
			out, terminal = append(out, &listenerv3.FilterChain{Filters: f}), true
			break
		}
		var subnets []*corev3.CidrRange
		for _, m := range tr.GetMatch() {
			if !b.l4Applies(m, port) {
				continue
			}
			if len(m.GetDestinationSubnets()) == 0 {
				out, terminal = append(out, &listenerv3.FilterChain{Filters: f}), true
				break
			}
			subnets = append(subnets, cidrRanges(m.GetDestinationSubnets())...)
		}
		if terminal {
			break
		}
		if len(subnets) > 0 {
			out = append(out, &listenerv3.FilterChain{FilterChainMatch: &listenerv3.FilterChainMatch{PrefixRanges: subnets}, Filters: f})
		}
	}
	if out != nil && !terminal {
		out = append(out, &listenerv3.FilterChain{Filters: []*listenerv3.Filter{b.tcpFilter(model.ClusterName(port, "", svc.Hostname))}})
	}
	return out
}

// tlsChains gives each distinct SNI (and subnet) match of the tls routes a
// chain; nil when none applies (then the port is plain TCP to the service).
func (b *routeBuilder) tlsChains(vs *networking.VirtualService, svc *model.Service, port uint16) []*listenerv3.FilterChain {
	if vs == nil {
		return nil
	}
	var out []*listenerv3.FilterChain
	seen := map[string]bool{}
	for _, tr := range vs.Spec.GetTls() {
		if len(tr.GetRoute()) == 0 {
			continue
		}
		for _, m := range tr.GetMatch() {
			if !b.l4Applies(m, port) {
				continue
			}
			key := strings.Join(m.GetSniHosts(), ",") + "|" + strings.Join(m.GetDestinationSubnets(), ",")
			if seen[key] {
				continue
			}
			seen[key] = true
			fcm := &listenerv3.FilterChainMatch{ServerNames: m.GetSniHosts(), PrefixRanges: cidrRanges(m.GetDestinationSubnets())}
			out = append(out, &listenerv3.FilterChain{FilterChainMatch: fcm, Filters: b.tcpProxy(tr.GetRoute(), vs, svc, port)})
		}
	}
	return out
}

// l4Applies reports whether a tcp or tls match applies to port and to b's
// proxies (l4FromHere).
func (b *routeBuilder) l4Applies(m l4Match, port uint16) bool {
	return (m.GetPort() == 0 || m.GetPort() == uint32(port)) && b.l4FromHere(m.GetGateways(), m.GetSourceLabels(), m.GetSourceNamespace())
}

// l4Match is what l4Applies reads of a tcp or tls match.
type l4Match interface {
	GetPort() uint32
	GetGateways() []string
	GetSourceLabels() map[string]string
	GetSourceNamespace() string
}

// tcpProxy forwards to one destination or splits by weight (stat prefix
// "name.namespace" of the VirtualService, as Istio names it).
func (b *routeBuilder) tcpProxy(rds []*apinet.RouteDestination, vs *networking.VirtualService, svc *model.Service, port uint16) []*listenerv3.Filter {
	if len(rds) == 1 {
		return []*listenerv3.Filter{b.tcpFilter(b.destination(rds[0].GetDestination(), vs.Namespace, svc, port))}
	}
	wc := &tcpv3.TcpProxy_WeightedCluster{}
	for _, rd := range rds {
		if rd.GetWeight() > 0 {
			wc.Clusters = append(wc.Clusters, &tcpv3.TcpProxy_WeightedCluster_ClusterWeight{
				Name: b.destination(rd.GetDestination(), vs.Namespace, svc, port), Weight: uint32(rd.GetWeight())})
		}
	}
	if len(wc.Clusters) == 0 {
		return []*listenerv3.Filter{b.tcpFilter(b.destination(rds[0].GetDestination(), vs.Namespace, svc, port))}
	}
	return []*listenerv3.Filter{tcpProxyFilter(&tcpv3.TcpProxy{
		StatPrefix: vs.Name + "." + vs.Namespace, ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: wc}, AccessLog: b.logs,
	})}
}

// cidrRanges parses subnets ("10.0.0.0/8" or an address); ones that do
// not parse are left out (validation rejects them).
func cidrRanges(subnets []string) []*corev3.CidrRange {
	var out []*corev3.CidrRange
	for _, s := range subnets {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, &corev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
		} else if _, err := netip.ParseAddr(s); err == nil {
			out = append(out, cidr(s))
		}
	}
	return out
}

// needsTLSInspector reports whether any chain matches by SNI.
func needsTLSInspector(chains []*listenerv3.FilterChain) bool {
	for _, c := range chains {
		if len(c.GetFilterChainMatch().GetServerNames()) > 0 {
			return true
		}
	}
	return false
}

// outboundCatchAll is where virtualOutbound sends destinations it has no
// chain for: the PassthroughCluster (or the Sidecar's egress proxy) under
// ALLOW_ANY, the BlackHoleCluster under REGISTRY_ONLY.
func outboundCatchAll(sc *model.Scope) string {
	if sc.OutboundPolicy == model.OutboundRegistryOnly {
		return BlackHoleCluster
	}
	if ep := sc.EgressProxy; ep != nil {
		b := &routeBuilder{scope: sc}
		host := sc.ResolveHost(ep.GetHost(), sc.Namespace)
		port := uint16(ep.GetPort().GetNumber())
		if !b.clusterExists(port, ep.GetSubset(), host) {
			return BlackHoleCluster
		}
		return model.ClusterName(port, ep.GetSubset(), host)
	}
	return PassthroughCluster
}
