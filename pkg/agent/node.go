package agent

import (
	"path/filepath"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/agent/bootstrap"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// bootstrapNode is the node the proxy's bootstrap names: its ID, its
// service cluster, and Istio's node metadata (ISTIO_META_*, pod facts,
// PROXY_CONFIG).
func bootstrapNode(cfg *config.Config) bootstrap.Node {
	meta := map[string]any{}
	for _, k := range cfg.SortedMetadataKeys() {
		meta[k] = cfg.Metadata[k]
	}
	meta["NAMESPACE"] = cfg.PodNamespace
	meta["NAME"] = cfg.PodName
	meta["SERVICE_ACCOUNT"] = cfg.Identity.ServiceAccount
	meta["CLUSTER_ID"] = cfg.Cluster
	if cfg.InstanceIP != "" {
		meta["INSTANCE_IPS"] = cfg.InstanceIP
	}
	if len(cfg.Labels) > 0 {
		meta["LABELS"] = anyMap(cfg.Labels)
	}
	if len(cfg.Annotations) > 0 {
		meta["ANNOTATIONS"] = anyMap(cfg.Annotations)
	}
	// What Istio's agent also tells istiod (pkg/model NodeMetadata).
	meta["ISTIO_VERSION"] = config.IstioVersion
	meta["ENVOY_STATUS_PORT"] = float64(config.EnvoyStatusPort)
	meta["ENVOY_PROMETHEUS_PORT"] = float64(config.EnvoyPrometheusPort)
	meta["WORKLOAD_IDENTITY_SOCKET_FILE"] = cfg.WorkloadIdentitySocket
	if !cfg.Plaintext {
		host, _, _ := strings.Cut(cfg.Proxy.DiscoveryAddress, ":")
		meta["PILOT_SAN"] = []any{host}
	}
	if pc, err := cfg.Proxy.AsMap(); err == nil {
		meta["PROXY_CONFIG"] = pc
	}
	cluster := cfg.Proxy.GetServiceCluster()
	if app := cfg.Labels["app"]; app != "" {
		cluster = app + "." + cfg.PodNamespace
	}
	return bootstrap.Node{ID: cfg.NodeID(), Cluster: cluster, Metadata: meta}
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// xdsNode is the node of the agent's own stream (NameTable, and clusters
// for SRV answers). It never carries GENERATOR, even when the pod's
// metadata says grpc (Istio's grpc-agent template sets ISTIO_META_GENERATOR
// for the app): the agent asks for every cluster, which istiod's proxyless
// generator refuses to send without names.
func xdsNode(cfg *config.Config) []byte {
	n := bootstrapNode(cfg)
	delete(n.Metadata, "GENERATOR")
	return (&xdswire.Node{ID: n.ID, Cluster: n.Cluster, Metadata: n.Metadata}).Marshal()
}

func writeGRPCBootstrap(cfg *config.Config) error {
	sock, err := filepath.Abs(cfg.Path(config.XDSSocket))
	if err != nil {
		return err
	}
	certDir, err := filepath.Abs(outputCerts(cfg))
	if err != nil {
		return err
	}
	g := &bootstrap.GRPC{Node: bootstrapNode(cfg), ServerURI: "unix://" + sock, CertDir: certDir}
	js, err := g.JSON()
	if err != nil {
		return err
	}
	return bootstrap.Write(cfg.Path(cfg.GRPCBootstrap), js)
}

// outputCerts is where the certificates are written out, "" for nowhere.
func outputCerts(cfg *config.Config) string {
	if cfg.OutputCerts == "" {
		return ""
	}
	return cfg.Path(cfg.OutputCerts)
}
