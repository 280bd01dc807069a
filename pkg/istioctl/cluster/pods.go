package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ports istioctl forwards to.
const (
	// IstiodDebugPort serves istiod's /debug endpoints (its --httpAddr;
	// Istio's istiod serves them there too).
	IstiodDebugPort uint16 = 8080
	// IstiodMonitoringPort serves /metrics, /ready and /version (its
	// --monitoringAddr; Istio's chart's 15014).
	IstiodMonitoringPort uint16 = 15014
	// AgentStatusPort is pilot-agent's status port, which serves
	// /debug/certs (Istio's default; a pod may move it with the
	// status.sidecar.istio.io/port annotation).
	AgentStatusPort uint16 = 15020
)

// statusPortAnnotation moves a pod's agent status port (Istio's annotation).
const statusPortAnnotation = "status.sidecar.istio.io/port"

// IstiodNotFoundError says no running istiod was found.
type IstiodNotFoundError struct {
	Namespace, Selector string
}

// Error names where istiod was looked for.
func (e *IstiodNotFoundError) Error() string {
	return fmt.Sprintf("no running istiod pod in namespace %s (label %s); is --istioNamespace/-i or --revision right?", e.Namespace, e.Selector)
}

// IstiodSelector is the label selector of the istiod pods of a revision
// (empty: every revision), as Istio's istioctl selects them.
func IstiodSelector(revision string) string {
	sel := "app=istiod"
	if revision != "" {
		sel += ",istio.io/rev=" + revision
	}
	return sel
}

// IstiodPods lists the running istiod pods of a revision in namespace:
// ready ones first, then by name. It returns an *IstiodNotFoundError when
// there are none.
func (c *Cluster) IstiodPods(ctx context.Context, namespace, revision string) ([]corev1.Pod, error) {
	sel := IstiodSelector(revision)
	var list corev1.PodList
	err := c.Clients.Core.Get().Namespace(namespace).Resource("pods").VersionedParams(&metav1.ListOptions{
		LabelSelector: sel,
		FieldSelector: "status.phase=Running",
	}, metav1.ParameterCodec).Do(ctx).Into(&list)
	if err != nil {
		return nil, fmt.Errorf("list istiod pods in %s (%s): %w", namespace, sel, err)
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(pods) == 0 {
		return nil, &IstiodNotFoundError{Namespace: namespace, Selector: sel}
	}
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		if ra, rb := Ready(&a), Ready(&b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return pods, nil
}

// Ready reports whether the pod's Ready condition is true.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AgentPort returns the port of a running pod's agent status server: the
// annotation status.sidecar.istio.io/port, else 15020.
func (c *Cluster) AgentPort(ctx context.Context, namespace, name string) (uint16, error) {
	p := &corev1.Pod{}
	if err := c.Clients.Core.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(p); err != nil {
		return 0, fmt.Errorf("pod %s.%s: %w", name, namespace, err)
	}
	if p.Status.Phase != corev1.PodRunning {
		return 0, fmt.Errorf("pod %s.%s is %s, not Running", name, namespace, p.Status.Phase)
	}
	v, ok := p.Annotations[statusPortAnnotation]
	if !ok {
		return AgentStatusPort, nil
	}
	port, err := strconv.ParseUint(v, 10, 16)
	if err != nil || port == 0 {
		return 0, fmt.Errorf("pod %s.%s: annotation %s=%q is not a port", name, namespace, statusPortAnnotation, v)
	}
	return uint16(port), nil
}
