// Package cluster is how istioctl reaches a Kubernetes cluster: the client
// configuration picked from --kubeconfig, --context, KUBECONFIG, in-cluster
// config or ~/.kube/config (client-go's loading rules, as Istio's istioctl
// uses them), the istiod pods of a revision, and port forwards to pods
// through the API server behind the Forwarder interface.
package cluster

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// Options say which cluster to use.
type Options struct {
	// Kubeconfig is an explicit kubeconfig file (--kubeconfig); it wins over KUBECONFIG.
	Kubeconfig string
	// Context is the kubeconfig context to use (--context; empty: the current one).
	Context string
	// Getenv looks up KUBECONFIG and HOME (nil: nothing is set).
	Getenv func(string) string
}

// Cluster is a resolved connection to an API server.
type Cluster struct {
	// Config is the client configuration.
	Config *rest.Config
	// Clients are REST clients of the groups istioctl reads, on Config
	// (pkg/kuberest: Kubernetes' own in protobuf).
	Clients *kuberest.Clients
	// Namespace is the namespace of the selected context ("default" when it names none).
	Namespace string
}

// loadingRules are client-go's: the explicit file, else the files listed in
// KUBECONFIG, else ~/.kube/config; in-cluster config when these give nothing.
func loadingRules(o Options) *clientcmd.ClientConfigLoadingRules {
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}
	if v := getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		rules.Precedence = filepath.SplitList(v)
		rules.WarnIfAllMissing = true
	} else if home := getenv("HOME"); home != "" {
		rules.Precedence = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return rules
}

// ErrNoConfig says that no kubeconfig was found and istioctl is not in a pod.
var ErrNoConfig = errors.New("no Kubernetes configuration: no --kubeconfig, KUBECONFIG or ~/.kube/config, and not running in a pod")

// Load resolves the client configuration and makes the clients.
func Load(o Options) (*Cluster, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loadingRules(o), &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := cc.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, ErrNoConfig
	case err != nil && o.Kubeconfig != "":
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	case err != nil:
		return nil, fmt.Errorf("kubernetes configuration: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	cfg = rest.CopyConfig(cfg)
	// A one-off command: no need to be gentle with the API server.
	cfg.QPS, cfg.Burst = 50, 100
	clients, err := kuberest.New(cfg, true)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	return &Cluster{Config: cfg, Clients: clients, Namespace: ns}, nil
}
