package dnsproxy

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus series. Names match Istio's agent
// (dns_requests_total, dns_upstream_*), plus cache and bad-input counters.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	requests    *prometheus.CounterVec // protocol
	reqUDP      prometheus.Counter
	reqTCP      prometheus.Counter
	mesh        prometheus.Counter
	cacheHits   prometheus.Counter
	cacheMisses prometheus.Counter
	malformed   prometheus.Counter
	dropped     prometheus.Counter
	upRequests  *prometheus.CounterVec   // server, protocol
	upFailures  *prometheus.CounterVec   // server, reason
	upDuration  *prometheus.HistogramVec // server
}

// newMetrics creates the series and registers them with reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{reg: reg}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dns_requests_total", Help: "Total number of DNS requests received, by transport.",
	}, []string{"protocol"})
	m.reqUDP, m.reqTCP = m.requests.WithLabelValues("udp"), m.requests.WithLabelValues("tcp")
	m.mesh = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dns_mesh_answers_total", Help: "Total number of DNS requests answered from the mesh name table.",
	})
	m.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dns_upstream_cache_hits_total", Help: "Total number of DNS requests answered from the cache of upstream answers.",
	})
	m.cacheMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dns_upstream_cache_misses_total", Help: "Total number of DNS requests that missed the cache and were forwarded.",
	})
	m.malformed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dns_malformed_requests_total", Help: "Total number of DNS requests answered FORMERR or dropped as malformed.",
	})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dns_dropped_requests_total", Help: "Total number of DNS requests dropped because too many were waiting for upstreams.",
	})
	m.upRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dns_upstream_requests_total", Help: "Total number of DNS requests sent to upstream nameservers.",
	}, []string{"server", "protocol"})
	m.upFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dns_upstream_failures_total", Help: "Total number of failed DNS requests to upstream nameservers, by reason.",
	}, []string{"server", "reason"})
	m.upDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dns_upstream_request_duration_seconds",
		Help:    "Time for an upstream nameserver to answer a forwarded DNS request.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"server"})
	m.collectors = []prometheus.Collector{m.requests, m.mesh, m.cacheHits, m.cacheMisses,
		m.malformed, m.dropped, m.upRequests, m.upFailures, m.upDuration}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return nil, fmt.Errorf("register dns metrics: already registered (one Server per registry): %w", err)
			}
			return nil, fmt.Errorf("register dns metrics: %w", err)
		}
	}
	return m, nil
}

// unregister removes the series from the registry.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
