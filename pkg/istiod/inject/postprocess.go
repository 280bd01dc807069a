package inject

import (
	"slices"
	"sort"
	"strings"

	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
)

// The steps below are what Istio's injector does to the merged pod after
// rendering, so templates written for Istio (which leave these to the
// injector) inject the same pods here. Skiff's chart templates do some of
// them themselves; each step then finds its work done and changes nothing.

// sidecar is the pod's istio-proxy container (among the init containers
// for a native sidecar), or nil.
func sidecar(pod *corev1.Pod) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		if i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == "istio-proxy" }); i >= 0 {
			return &cs[i]
		}
	}
	return nil
}

func hasEnv(c *corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// clusterInfo is the cluster and network the proxy is told about: the
// values' global.multiCluster.clusterName and global.network, the pod's
// topology.istio.io/network label winning for the network.
func clusterInfo(pod *corev1.Pod, vals map[string]any) (cluster, network string) {
	cluster, _ = getString(vals, "", "global", "multiCluster", "clusterName")
	network, _ = getString(vals, "", "global", "network")
	if n, ok := pod.Labels[label.TopologyNetwork.Name]; ok {
		network = n
	}
	return cluster, network
}

// setClusterEnv moves ISTIO_META_CLUSTER_ID and ISTIO_META_NETWORK (those
// set) to the end of the proxy's environment with their values, and labels
// the pod with its network, as Istio does.
func setClusterEnv(pod *corev1.Pod, cluster, network string) {
	set := map[string]string{}
	if cluster != "" {
		set["ISTIO_META_CLUSTER_ID"] = cluster
	}
	if network != "" {
		set["ISTIO_META_NETWORK"] = network
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[label.TopologyNetwork.Name] = network
	}
	c := sidecar(pod)
	if c == nil || len(set) == 0 {
		return
	}
	env := slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { _, ok := set[e.Name]; return ok })
	for _, k := range sortedKeys(set) {
		env = append(env, corev1.EnvVar{Name: k, Value: set[k]})
	}
	c.Env = env
}

// promKey folds an annotation name the way Prometheus folds it into a
// label name, so prometheus.io/port and prometheus_io_port are one key.
func promKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k)
}

// securePort copies a non-zero ENVOY_SECURE_MERGED_METRICS_PORT of the
// proxy to prometheus.istio.io/secure-port unless the pod sets it.
func securePort(pod *corev1.Pod) {
	for k := range pod.Annotations {
		if promKey(k) == "prometheus_istio_io_secure_port" {
			return
		}
	}
	c := sidecar(pod)
	if c == nil {
		return
	}
	for _, e := range c.Env {
		if e.Name == "ENVOY_SECURE_MERGED_METRICS_PORT" && e.Value != "" && e.Value != "0" {
			pod.Annotations["prometheus.istio.io/secure-port"] = e.Value
			return
		}
	}
}

// addProbers gives the proxy ISTIO_KUBE_APP_PROBERS when the template did
// not.
func addProbers(pod *corev1.Pod, probers string) {
	if c := sidecar(pod); c != nil && probers != "" && !hasEnv(c, "ISTIO_KUBE_APP_PROBERS") {
		c.Env = append(c.Env, corev1.EnvVar{Name: "ISTIO_KUBE_APP_PROBERS", Value: probers})
	}
}

// orderInit puts the init containers in Istio's order: with a native
// sidecar istio-init or istio-validation, then istio-proxy, then
// enable-core-dump, then the rest; otherwise istio-validation first and
// istio-init then enable-core-dump last (so other init containers run
// before traffic is captured).
func orderInit(cs []corev1.Container) []corev1.Container {
	rank := func(n string) int {
		native := slices.ContainsFunc(cs, func(c corev1.Container) bool { return c.Name == "istio-proxy" })
		switch {
		case native && n == "istio-init", n == "istio-validation":
			return 0
		case native && n == "istio-proxy":
			return 1
		case native && n == "enable-core-dump":
			return 2
		case !native && n == "istio-init":
			return 4
		case !native && n == "enable-core-dump":
			return 5
		}
		return 3
	}
	out := append([]corev1.Container{}, cs...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Name) < rank(out[j].Name) })
	return out
}
