package istioctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
)

// endpoint is one istiod: its debug URL when given directly, else its pod
// (forwarded to when it is asked).
type endpoint struct {
	// Name is shown in the ISTIOD column: the pod's name, or the host.
	Name string
	// URL is the direct address; empty for a pod.
	URL string
	// Namespace is the pod's namespace.
	Namespace string
}

// reach is how a command reaches istiod and the agents: the addresses given
// on the command line (the lab, or after kubectl port-forward), else port
// forwards through the API server, as Istio's istioctl does.
type reach struct {
	env  *Env
	kube *kubeFlags
	// istiod is --istiod: a direct debug address that skips the cluster.
	istiod string
	// revision selects the istiod pods (-r).
	revision string

	cl    *cluster.Cluster
	stops []func()
}

// cluster loads the cluster configuration once.
func (r *reach) cluster() (*cluster.Cluster, error) {
	if r.cl != nil {
		return r.cl, nil
	}
	cl, err := cluster.Load(cluster.Options{Kubeconfig: r.kube.Kubeconfig, Context: r.kube.Context, Getenv: r.env.Getenv})
	if errors.Is(err, cluster.ErrNoConfig) {
		return nil, fmt.Errorf("%w; or give the address directly (--istiod URL, --agent URL)", err)
	}
	if err != nil {
		return nil, err
	}
	r.cl = cl
	return cl, nil
}

func (r *reach) forwarder(cl *cluster.Cluster) cluster.Forwarder {
	if r.env.NewForwarder != nil {
		return r.env.NewForwarder(cl)
	}
	return &cluster.PortForwarder{Config: cl.Config}
}

// namespace is the namespace of a pod named without one: -n, else the
// context's (only when the cluster is used anyway), else default.
func (r *reach) namespace(useCluster bool) (string, error) {
	if r.kube.Namespace != "" {
		return r.kube.Namespace, nil
	}
	if !useCluster {
		return "default", nil
	}
	cl, err := r.cluster()
	if err != nil {
		return "", err
	}
	return cl.Namespace, nil
}

// istiods returns the istiods to ask: --istiod, or every running istiod
// pod of the revision, ready ones first.
func (r *reach) istiods(ctx context.Context) ([]endpoint, error) {
	if r.istiod != "" {
		return []endpoint{{Name: hostOf(r.istiod), URL: r.istiod}}, nil
	}
	cl, err := r.cluster()
	if err != nil {
		return nil, err
	}
	pods, err := cl.IstiodPods(ctx, r.kube.IstioNamespace, r.revision)
	if err != nil {
		return nil, err
	}
	out := make([]endpoint, 0, len(pods))
	for _, p := range pods {
		out = append(out, endpoint{Name: p.Name, Namespace: p.Namespace})
	}
	return out, nil
}

// url returns an istiod's debug URL, forwarding to its pod's port 8080.
func (r *reach) url(ctx context.Context, ep endpoint) (string, error) {
	return r.urlOn(ctx, ep, cluster.IstiodDebugPort)
}

// urlOn returns the URL of an istiod's pod port (its direct URL when
// given: istiod serves what the tools ask for there too).
func (r *reach) urlOn(ctx context.Context, ep endpoint, port uint16) (string, error) {
	if ep.URL != "" {
		return ep.URL, nil
	}
	cl, err := r.cluster()
	if err != nil {
		return "", err
	}
	addr, stop, err := r.forwarder(cl).Forward(ctx, ep.Namespace, ep.Name, port)
	if err != nil {
		return "", err
	}
	r.stops = append(r.stops, stop)
	return "http://" + addr, nil
}

// agent returns the status endpoint of a pod's agent: --agent, or a
// forward to its status port.
func (r *reach) agent(ctx context.Context, direct, namespace, pod string) (string, error) {
	if direct != "" {
		return direct, nil
	}
	cl, err := r.cluster()
	if err != nil {
		return "", err
	}
	port, err := cl.AgentPort(ctx, namespace, pod)
	if err != nil {
		return "", err
	}
	addr, stop, err := r.forwarder(cl).Forward(ctx, namespace, pod, port)
	if err != nil {
		return "", err
	}
	r.stops = append(r.stops, stop)
	return "http://" + addr, nil
}

// close ends the forwards.
func (r *reach) close() {
	for _, s := range r.stops {
		s()
	}
	r.stops = nil
}
