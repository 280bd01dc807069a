package install

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/cni/podcache"
	"github.com/skiff-mesh/skiff/pkg/cni/repair"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// newRepairedCounter counts repair actions by type and result, Istio's metric.
func newRepairedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "istio_cni_repair_pods_repaired_total",
		Help: "Total number of pods repaired by repair controller",
	}, []string{"type", "result"})
}

// newRepair returns the race repair controller f asks for, talking to the
// API server with the service-account credentials, or nil when repair is
// off (disabled, or no node name to watch).
func newRepair(f Flags, log *slog.Logger, repaired *prometheus.CounterVec) (*repair.Controller, error) {
	r := f.Repair
	switch {
	case !r.Enabled:
		log.Info("race repair disabled")
		return nil, nil
	case r.NodeName == "":
		log.Warn("race repair off: no node name (REPAIR_NODE_NAME or NODE_NAME)")
		return nil, nil
	case f.Config.KubeHost == "":
		return nil, errors.New("race repair: no API server address (--kube-host, KUBERNETES_SERVICE_HOST)")
	}
	client, err := apiClient(f)
	if err != nil {
		return nil, fmt.Errorf("race repair: %w", err)
	}
	c, err := repair.New(r, client, repair.Kube{Client: client}, log)
	if err != nil {
		return nil, err
	}
	c.Observe(func(a repair.Action, res repair.Result) { repaired.WithLabelValues(string(a), string(res)).Inc() })
	return c, nil
}

// apiClient is the node agent's client of the API server, with the
// service account token the kubelet mounts (re-read as it rotates): a
// REST client of core/v1 that reads pods as protobuf.
func apiClient(f Flags) (rest.Interface, error) {
	client, err := kuberest.NewCore(&rest.Config{
		Host:            "https://" + net.JoinHostPort(f.Config.KubeHost, strconv.Itoa(int(f.Config.KubePort))),
		BearerTokenFile: f.Config.TokenPath,
		TLSClientConfig: rest.TLSClientConfig{CAFile: f.Config.CAPath},
		UserAgent:       "install-cni",
	}, true)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return client, nil
}

// newPodCache is the cache of the node's pods the plugin asks first
// (package podcache), when the node and the API server are known.
func newPodCache(f Flags, log *slog.Logger) (*podcache.Cache, error) {
	if f.Repair.NodeName == "" || f.Config.KubeHost == "" {
		log.Warn("pod cache off: no node name or API server address; the plugin asks the API server for each pod")
		return nil, nil
	}
	client, err := apiClient(f)
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	return podcache.New(client, f.Repair.NodeName, log.With("component", "podcache"))
}
