package gen

import (
	"math"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
)

// envoyCluster is an Envoy cluster being built with its HTTP protocol
// options, which go into typed_extension_protocol_options once complete.
type envoyCluster struct {
	c    *clusterv3.Cluster
	http *httpv3.HttpProtocolOptions
}

// httpOptions returns the protocol options, created on first use.
func (b *envoyCluster) httpOptions() *httpv3.HttpProtocolOptions {
	if b.http == nil {
		b.http = &httpv3.HttpProtocolOptions{}
	}
	return b.http
}

// setH2 makes upstream connections HTTP/2, unless a protocol is chosen.
func (b *envoyCluster) setH2() {
	o := b.httpOptions()
	if o.UpstreamProtocolOptions == nil {
		o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		}}
	}
}

// isH2 reports whether upstream connections are explicitly HTTP/2.
func (b *envoyCluster) isH2() bool {
	return b.http.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// finish stores the protocol options in the cluster; Envoy requires an
// upstream protocol in them, HTTP/1.1 unless one was chosen.
func (b *envoyCluster) finish() *clusterv3.Cluster {
	if b.http != nil {
		if b.http.UpstreamProtocolOptions == nil {
			b.http.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
			}}
		}
		b.c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpOptionsKey: mustAny(b.http)}
	}
	return b.c
}

// defaultThresholds are Istio's circuit breaker thresholds when a rule
// sets none: no limit (Envoy's own defaults of 1024 connections and
// requests and 3 retries trip during rollouts), and, as Istio 1.31 by
// default, no gauges of the remaining capacity.
func defaultThresholds() *clusterv3.CircuitBreakers_Thresholds {
	return &clusterv3.CircuitBreakers_Thresholds{
		MaxRetries:         wrapperspb.UInt32(math.MaxUint32),
		MaxRequests:        wrapperspb.UInt32(math.MaxUint32),
		MaxConnections:     wrapperspb.UInt32(math.MaxUint32),
		MaxPendingRequests: wrapperspb.UInt32(math.MaxUint32),
	}
}

// shouldH2Upgrade reports whether connectionPool.http.h2UpgradePolicy asks
// for HTTP/2 upstream (useClientProtocol wins; the mesh default is
// DO_NOT_UPGRADE, so only an explicit UPGRADE upgrades).
func shouldH2Upgrade(cp *apinet.ConnectionPoolSettings) bool {
	h := cp.GetHttp()
	return h != nil && !h.GetUseClientProtocol() && h.GetH2UpgradePolicy() == apinet.ConnectionPoolSettings_HTTPSettings_UPGRADE
}

// applyRetryBudget limits retries to a share of active requests: percent
// (20 when unset), at least minRetryConcurrency (3 when 0) at once, over
// budgetInterval.
func applyRetryBudget(t *clusterv3.CircuitBreakers_Thresholds, rb *apinet.TrafficPolicy_RetryBudget) {
	if rb == nil {
		return
	}
	percent := 20.0
	if p := rb.GetPercent(); p != nil {
		percent = p.GetValue()
	}
	conc := uint32(3)
	if n := rb.GetMinRetryConcurrency(); n > 0 {
		conc = n
	}
	t.RetryBudget = &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
		BudgetPercent:       &typev3.Percent{Value: percent},
		BudgetInterval:      rb.GetBudgetInterval(),
		MinRetryConcurrency: wrapperspb.UInt32(conc),
	}
}

// applyConnectionPool sets what Istio derives from connectionPool (nil:
// only the defaults) and the retry budget: circuit breaker thresholds (http2MaxRequests,
// http1MaxPendingRequests, maxRetries, tcp.maxConnections; 0 keeps the
// default), the connect timeout, TCP keepalive, the HTTP idle timeout
// (tcp.idleTimeout when http sets none), max requests per connection, max
// connection duration, HTTP/2 max concurrent streams and keepalive, and
// useClientProtocol.
func applyConnectionPool(b *envoyCluster, cp *apinet.ConnectionPoolSettings, rb *apinet.TrafficPolicy_RetryBudget) {
	t := defaultThresholds()
	applyRetryBudget(t, rb)
	if rb := cp.GetHttp(); rb != nil {
		if n := rb.GetHttp2MaxRequests(); n > 0 {
			t.MaxRequests = wrapperspb.UInt32(uint32(n))
		}
		if n := rb.GetHttp1MaxPendingRequests(); n > 0 {
			t.MaxPendingRequests = wrapperspb.UInt32(uint32(n))
		}
		if n := rb.GetMaxRetries(); n > 0 {
			t.MaxRetries = wrapperspb.UInt32(uint32(n))
		}
	}
	tcp := cp.GetTcp()
	if d := tcp.GetConnectTimeout(); d != nil {
		b.c.ConnectTimeout = d
	}
	if n := tcp.GetMaxConnections(); n > 0 {
		t.MaxConnections = wrapperspb.UInt32(uint32(n))
	}
	applyTCPKeepalive(b.c, tcp.GetTcpKeepalive())
	b.c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{t}}

	h := cp.GetHttp()
	idle := h.GetIdleTimeout()
	if idle == nil {
		idle = tcp.GetIdleTimeout()
	}
	perConn, streams, keepalive, maxDur := h.GetMaxRequestsPerConnection(), h.GetMaxConcurrentStreams(), h.GetHttp2KeepAlive(), tcp.GetMaxConnectionDuration()
	if idle != nil || perConn > 0 || streams > 0 || keepalive != nil || maxDur != nil {
		o := b.httpOptions()
		if o.CommonHttpProtocolOptions == nil {
			o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{}
		}
		common := o.CommonHttpProtocolOptions
		common.IdleTimeout = idle
		if perConn > 0 {
			common.MaxRequestsPerConnection = wrapperspb.UInt32(uint32(perConn))
		}
		common.MaxConnectionDuration = maxDur
		if h2 := o.GetExplicitHttpConfig().GetHttp2ProtocolOptions(); h2 != nil {
			if streams > 0 {
				h2.MaxConcurrentStreams = wrapperspb.UInt32(uint32(streams))
			}
			if keepalive != nil {
				h2.ConnectionKeepalive = &corev3.KeepaliveSettings{Interval: keepalive.GetInterval(), Timeout: keepalive.GetTimeout()}
			}
		}
	}
	if h.GetUseClientProtocol() {
		o := b.httpOptions()
		h1 := o.GetExplicitHttpConfig().GetHttpProtocolOptions()
		if h1 == nil {
			h1 = &corev3.Http1ProtocolOptions{}
		}
		o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions: h1, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		}}
	}
}

// applyTCPKeepalive turns on SO_KEEPALIVE with the rule's probes, time and
// interval (whole seconds; the OS default for each one unset).
func applyTCPKeepalive(c *clusterv3.Cluster, k *apinet.ConnectionPoolSettings_TCPSettings_TcpKeepalive) {
	if k == nil {
		return
	}
	ka := &corev3.TcpKeepalive{}
	if k.GetProbes() > 0 {
		ka.KeepaliveProbes = wrapperspb.UInt32(k.GetProbes())
	}
	if t := k.GetTime(); t != nil {
		ka.KeepaliveTime = wrapperspb.UInt32(uint32(t.GetSeconds()))
	}
	if i := k.GetInterval(); i != nil {
		ka.KeepaliveInterval = wrapperspb.UInt32(uint32(i.GetSeconds()))
	}
	c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: ka}
}

// applyGRPCCircuitBreakers sets the one threshold grpc-go honours
// (gRFC A32): max_requests, from http2MaxRequests when above 0, as Istio's
// proxyless generator does.
func applyGRPCCircuitBreakers(c *clusterv3.Cluster, cp *apinet.ConnectionPoolSettings) {
	if n := cp.GetHttp().GetHttp2MaxRequests(); n > 0 {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(uint32(n))}}}
	}
}
