package gen

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	apinet "istio.io/api/networking/v1alpha3"
)

const proxyProtocolSocketName = "envoy.transport_sockets.upstream_proxy_protocol"

func rawBufferSocket() *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: rawBufferSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&rawbufferv3.RawBuffer{})}}
}

// applyProxyProtocol sends a PROXY protocol header (the rule's version)
// first on every upstream connection, as Istio does: the cluster's
// transport socket, or each transport socket match's, is wrapped in the
// upstream proxy protocol socket; a plaintext cluster gets it around a raw
// buffer.
func applyProxyProtocol(c *clusterv3.Cluster, pp *apinet.TrafficPolicy_ProxyProtocol) {
	if pp == nil {
		return
	}
	wrap := func(inner *corev3.TransportSocket) *corev3.TransportSocket {
		return &corev3.TransportSocket{Name: proxyProtocolSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
			Config:          &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_Version(pp.GetVersion())},
			TransportSocket: inner,
		})}}
	}
	if c.TransportSocket == nil && len(c.TransportSocketMatches) == 0 {
		c.TransportSocket = wrap(rawBufferSocket())
		return
	}
	if c.TransportSocket != nil {
		c.TransportSocket = wrap(c.TransportSocket)
	}
	for _, m := range c.TransportSocketMatches {
		m.TransportSocket = wrap(m.TransportSocket)
	}
}
