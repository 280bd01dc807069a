package install

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthHandler serves /healthz (the process is up) and /readyz (the plugin is installed).
func (in *Installer) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !in.Ready() {
			http.Error(w, "CNI plugin not installed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// MetricsHandler serves the installer's Prometheus metrics, and extra's.
func (in *Installer) MetricsHandler(extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(extra...)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "istio_cni_install_ready", Help: "Whether the CNI plugin is installed (1) or not (0)."},
			func() float64 {
				if in.Ready() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "istio_cni_config_repairs_total", Help: "Rewrites of the CNI configuration after another component changed it."},
			func() float64 { return float64(in.Repairs.Load()) }),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
