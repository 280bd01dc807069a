// Package metrics holds istiod's Prometheus collectors, named as Istio's
// where Istio has one. Collectors live in a Registry passed in, never in the
// global default registry.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are istiod's collectors. A nil *Metrics records nothing.
type Metrics struct {
	// Connected is pilot_xds: connected xDS clients.
	Connected prometheus.Gauge
	// Pushes is pilot_xds_pushes by type (cds, eds, lds, rds, nds).
	Pushes *prometheus.CounterVec
	// Rejects is pilot_total_xds_rejects by type: NACKs received.
	Rejects *prometheus.CounterVec
	// ExpiredNonce is pilot_xds_expired_nonce by type: stale requests ignored.
	ExpiredNonce *prometheus.CounterVec
	// PushTriggers is pilot_push_triggers by type (full, endpoint).
	PushTriggers *prometheus.CounterVec
	// Convergence is pilot_proxy_convergence_time: change seen to push done.
	Convergence prometheus.Histogram
	// Debounce is pilot_debounce_time: first event to push start.
	Debounce prometheus.Histogram
	// Services is pilot_services: services known.
	Services prometheus.Gauge
	// VirtualServices is pilot_virt_services: VirtualServices known.
	VirtualServices prometheus.Gauge
	// ConfigErrors is pilot_config_rejected: objects rejected as invalid.
	ConfigErrors prometheus.Gauge
	// InternalErrors is pilot_total_xds_internal_errors by type: responses
	// that could not be generated (and were not sent).
	InternalErrors *prometheus.CounterVec
}

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	byType := []string{"type"}
	buckets := []float64{.01, .05, .1, .25, .5, 1, 3, 5, 10, 20, 30}
	m := &Metrics{
		Connected:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilot_xds", Help: "Number of endpoints connected to this pilot using XDS."}),
		Pushes:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_xds_pushes", Help: "Pilot build and send errors for lds, rds, cds and eds."}, byType),
		Rejects:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_total_xds_rejects", Help: "Total number of XDS responses from pilot rejected by proxy."}, byType),
		ExpiredNonce:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_xds_expired_nonce", Help: "Total number of XDS requests with an expired nonce."}, byType),
		PushTriggers:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_push_triggers", Help: "Total number of times a push was triggered, labeled by reason for the push."}, byType),
		Convergence:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pilot_proxy_convergence_time", Help: "Delay in seconds between config change and a proxy receiving all required configuration.", Buckets: buckets}),
		Debounce:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pilot_debounce_time", Help: "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue.", Buckets: buckets}),
		Services:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilot_services", Help: "Total services known to pilot."}),
		VirtualServices: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilot_virt_services", Help: "Total virtual services known to pilot."}),
		ConfigErrors:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilot_config_rejected", Help: "Configuration objects rejected as invalid (skiff)."}),
		InternalErrors:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_total_xds_internal_errors", Help: "Total number of internal XDS errors in pilot."}, byType),
	}
	reg.MustRegister(m.Connected, m.Pushes, m.Rejects, m.ExpiredNonce, m.PushTriggers, m.Convergence, m.Debounce,
		m.Services, m.VirtualServices, m.ConfigErrors, m.InternalErrors)
	return m
}

// Push counts one response of a type ("cds", ...).
func (m *Metrics) Push(typ string) {
	if m != nil {
		m.Pushes.WithLabelValues(typ).Inc()
	}
}

// Reject counts one NACK of a type.
func (m *Metrics) Reject(typ string) {
	if m != nil {
		m.Rejects.WithLabelValues(typ).Inc()
	}
}

// Expired counts one request with a stale nonce.
func (m *Metrics) Expired(typ string) {
	if m != nil {
		m.ExpiredNonce.WithLabelValues(typ).Inc()
	}
}

// Connect adds d (1 or -1) to the connected clients.
func (m *Metrics) Connect(d float64) {
	if m != nil {
		m.Connected.Add(d)
	}
}

// Trigger counts one push of a kind ("full", "endpoint").
func (m *Metrics) Trigger(kind string) {
	if m != nil {
		m.PushTriggers.WithLabelValues(kind).Inc()
	}
}

// InternalError counts one response of a type that could not be generated.
func (m *Metrics) InternalError(typ string) {
	if m != nil {
		m.InternalErrors.WithLabelValues(typ).Inc()
	}
}
