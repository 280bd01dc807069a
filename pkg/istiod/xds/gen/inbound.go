package gen

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	httpinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// sidecarInbound builds an Envoy sidecar's virtualInbound listener (15006)
// as Istio does: a blackhole chain for traffic to 15006 itself, the
// passthrough chains (ports no service names, under the workload's mTLS
// mode), and per workload port the chains of its PeerAuthentication mode
// (STRICT: TLS only; PERMISSIVE: TLS matched by Istio's ALPN values, and
// plaintext; DISABLE: plaintext), each with the workload's
// AuthorizationPolicies (HTTP or network RBAC) and, on HTTP chains, its
// RequestAuthentications (JWT). The TLS inspector runs on the ports with
// TLS chains, the HTTP inspector where a chain matches plaintext HTTP ALPN.
func sidecarInbound(wp workloadPolicies, ports []inboundPort, mesh *meshconfig.MeshConfig) *listenerv3.Listener {
	mtls := wp.mtls
	s := &inboundSecurity{authz: wp.authz, jwt: jwtFilter(wp.authn), mesh: mesh, logs: accessLogs(mesh)}
	chains := []*listenerv3.FilterChain{{
		Name:             VirtualInbound + "-blackhole",
		FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(VirtualInboundPort)},
		Filters:          []*listenerv3.Filter{blackHoleFilter()},
	}}
	chains = append(chains, s.portChains(inboundPort{protocol: protocolUnknown}, mtls.Mode)...)
	for _, p := range ports {
		chains = append(chains, s.portChains(p, mtls.ForPort(uint32(p.port)))...)
	}
	l := &listenerv3.Listener{
		Name:                             VirtualInbound,
		Address:                          address("0.0.0.0", VirtualInboundPort),
		TrafficDirection:                 corev3.TrafficDirection_INBOUND,
		ContinueOnListenerFiltersTimeout: true,
		ListenerFiltersTimeout:           durationpb.New(0),
		FilterChains:                     chains,
		AccessLog:                        listenerLogs(s.logs),
	}
	l.ListenerFilters = listenerFilters(chains)
	return l
}

// listenerFilters are original_dst, then the TLS and HTTP inspectors,
// each disabled on the destination ports none of whose chains need it.
func listenerFilters(chains []*listenerv3.FilterChain) []*listenerv3.ListenerFilter {
	type need struct{ tls, http bool }
	byPort := map[uint32]need{}
	for _, fc := range chains {
		m := fc.GetFilterChainMatch()
		n := byPort[m.GetDestinationPort().GetValue()]
		n.tls = n.tls || m.GetTransportProtocol() == transportTLS
		n.http = n.http || slices.Contains(m.GetApplicationProtocols(), "http/1.1") || slices.Contains(m.GetApplicationProtocols(), "h2c")
		byPort[m.GetDestinationPort().GetValue()] = n
	}
	out := []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&origdstv3.OriginalDst{})}}}
	var tlsOff, httpOff []uint32
	anyTLS, anyHTTP := false, false
	for p, n := range byPort {
		anyTLS, anyHTTP = anyTLS || n.tls, anyHTTP || n.http
		if p != 0 && !n.tls {
			tlsOff = append(tlsOff, p)
		}
		if !n.http {
			httpOff = append(httpOff, p)
		}
	}
	if anyTLS {
		f := &listenerv3.ListenerFilter{Name: "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspv3.TlsInspector{})}}
		if byPort[0].tls {
			f.FilterDisabled = portsPredicate(tlsOff)
		} else {
			var on []uint32
			for p, n := range byPort {
				if p != 0 && n.tls {
					on = append(on, p)
				}
			}
			if pr := portsPredicate(on); pr != nil {
				f.FilterDisabled = &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_NotMatch{NotMatch: pr}}
			}
		}
		out = append(out, f)
	}
	if anyHTTP {
		out = append(out, &listenerv3.ListenerFilter{Name: "envoy.filters.listener.http_inspector",
			ConfigType:     &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&httpinspv3.HttpInspector{})},
			FilterDisabled: portsPredicate(httpOff)})
	}
	return out
}

// portsPredicate matches connections to any of ports (nil for none).
func portsPredicate(ports []uint32) *listenerv3.ListenerFilterChainMatchPredicate {
	slices.Sort(ports)
	var rules []*listenerv3.ListenerFilterChainMatchPredicate
	for _, p := range ports {
		rules = append(rules, &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange{
			DestinationPortRange: &typev3.Int32Range{Start: int32(p), End: int32(p) + 1}}})
	}
	switch len(rules) {
	case 0:
		return nil
	case 1:
		return rules[0]
	}
	return &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_OrMatch{
		OrMatch: &listenerv3.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules}}}
}
