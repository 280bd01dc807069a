package dnsproxy

import (
	"errors"
	"fmt"

	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// metrics are the proxy's Prometheus series. Names match Istio's agent
// (dns_requests_total, dns_upstream_*), plus cache and bad-input counters.
type metrics struct {
	reg *promtext.Registry
	all []promtext.Metric

	requests    *promtext.CounterVec // protocol
	reqUDP      *promtext.Counter
	reqTCP      *promtext.Counter
	mesh        *promtext.Counter
	cacheHits   *promtext.Counter
	cacheMisses *promtext.Counter
	malformed   *promtext.Counter
	dropped     *promtext.Counter
	upRequests  *promtext.CounterVec   // server, protocol
	upFailures  *promtext.CounterVec   // server, reason
	upDuration  *promtext.HistogramVec // server
}

// newMetrics creates the series and registers them with reg (nil: none).
// It registers all of them or, on error, none.
func newMetrics(reg *promtext.Registry) (*metrics, error) {
	m := &metrics{reg: reg}
	m.requests = promtext.NewCounterVec("dns_requests_total",
		"Total number of DNS requests received, by transport.", "protocol")
	m.reqUDP, m.reqTCP = m.requests.With("udp"), m.requests.With("tcp")
	m.mesh = promtext.NewCounter("dns_mesh_answers_total",
		"Total number of DNS requests answered from the mesh name table.")
	m.cacheHits = promtext.NewCounter("dns_upstream_cache_hits_total",
		"Total number of DNS requests answered from the cache of upstream answers.")
	m.cacheMisses = promtext.NewCounter("dns_upstream_cache_misses_total",
		"Total number of DNS requests that missed the cache and were forwarded.")
	m.malformed = promtext.NewCounter("dns_malformed_requests_total",
		"Total number of DNS requests answered FORMERR or dropped as malformed.")
	m.dropped = promtext.NewCounter("dns_dropped_requests_total",
		"Total number of DNS requests dropped because too many were waiting for upstreams.")
	m.upRequests = promtext.NewCounterVec("dns_upstream_requests_total",
		"Total number of DNS requests sent to upstream nameservers.", "server", "protocol")
	m.upFailures = promtext.NewCounterVec("dns_upstream_failures_total",
		"Total number of failed DNS requests to upstream nameservers, by reason.", "server", "reason")
	m.upDuration = promtext.NewHistogramVec("dns_upstream_request_duration_seconds",
		"Time for an upstream nameserver to answer a forwarded DNS request.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "server")
	m.all = []promtext.Metric{m.requests, m.mesh, m.cacheHits, m.cacheMisses,
		m.malformed, m.dropped, m.upRequests, m.upFailures, m.upDuration}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.all...); err != nil {
		if errors.Is(err, promtext.ErrAlreadyRegistered) {
			return nil, fmt.Errorf("register dns metrics: already registered (one Server per registry): %w", err)
		}
		return nil, fmt.Errorf("register dns metrics: %w", err)
	}
	return m, nil
}

// unregister removes the series from the registry.
func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.all...)
	}
}
