// Command install-cni is the CNI node agent's main process (the istio-cni
// DaemonSet): it installs the plugin on the node and keeps it chained.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/skiff-mesh/skiff/pkg/cni/install"
)

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func main() {
	var cfg install.Config
	var health, metrics, excluded, podNS, level string
	var nft bool
	flag.StringVar(&cfg.NetDir, "mounted-cni-net-dir", env("MOUNTED_CNI_NET_DIR", "/host/etc/cni/net.d"), "the node's CNI configuration dir (env MOUNTED_CNI_NET_DIR)")
	flag.StringVar(&cfg.BinDir, "cni-bin-dir", env("CNI_BIN_DIR", "/host/opt/cni/bin"), "the node's CNI plugin dir (env CNI_BIN_DIR)")
	flag.StringVar(&cfg.AgentRunDir, "cni-agent-run-dir", env("CNI_AGENT_RUN_DIR", "/var/run/istio-cni"), "where the plugin's kubeconfig is written (env CNI_AGENT_RUN_DIR)")
	flag.StringVar(&cfg.PluginSource, "plugin-binary", env("CNI_PLUGIN_BINARY", "/opt/cni/bin/istio-cni"), "the plugin binary to install (env CNI_PLUGIN_BINARY)")
	flag.StringVar(&cfg.TokenPath, "token", env("SERVICE_ACCOUNT_TOKEN", "/var/run/secrets/kubernetes.io/serviceaccount/token"), "service-account token (env SERVICE_ACCOUNT_TOKEN)")
	flag.StringVar(&cfg.CAPath, "ca", env("SERVICE_ACCOUNT_CA", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"), "API server CA (env SERVICE_ACCOUNT_CA)")
	flag.StringVar(&cfg.KubeHost, "kube-host", env("KUBERNETES_SERVICE_HOST", ""), "API server host (env KUBERNETES_SERVICE_HOST)")
	flag.StringVar(&cfg.KubePort, "kube-port", env("KUBERNETES_SERVICE_PORT", "443"), "API server port (env KUBERNETES_SERVICE_PORT)")
	flag.StringVar(&excluded, "exclude-namespaces", env("EXCLUDE_NAMESPACES", "kube-system"), "namespaces whose pods are never captured (env EXCLUDE_NAMESPACES)")
	flag.StringVar(&podNS, "pod-namespace", env("POD_NAMESPACE", "istio-system"), "the agent's namespace (env POD_NAMESPACE)")
	flag.StringVar(&level, "log-level", env("LOG_LEVEL", "info"), "plugin log level (env LOG_LEVEL)")
	flag.BoolVar(&nft, "native-nftables", env("NATIVE_NFTABLES", "false") == "true", "the plugin programs nftables directly (env NATIVE_NFTABLES)")
	flag.StringVar(&health, "health-addr", env("HEALTH_ADDR", ":8000"), "health server (/healthz, /readyz)")
	flag.StringVar(&metrics, "metrics-addr", env("METRICS_ADDR", ":15014"), "Prometheus metrics server")
	flag.Parse()

	var ns []string
	for _, n := range strings.Split(excluded, ",") {
		if n = strings.TrimSpace(n); n != "" {
			ns = append(ns, n)
		}
	}
	cfg.Entry = map[string]any{
		"type": install.PluginType, "plugin_log_level": level, "cni_agent_run_dir": cfg.AgentRunDir,
		"exclude_namespaces": ns, "pod_namespace": podNS, "native_nftables": nft,
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := install.Run(ctx, cfg, health, metrics, log); err != nil {
		fmt.Fprintln(os.Stderr, "install-cni:", err)
		os.Exit(1)
	}
}
