package inject

import (
	"fmt"
	"strings"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ignoredNamespaces never get sidecars, whatever the pod says (as in Istio).
var ignoredNamespaces = map[string]bool{"kube-system": true, "kube-public": true}

// Decision is whether a pod gets a sidecar, and why.
type Decision struct {
	// Inject is true when the pod gets a sidecar.
	Inject bool
	// Reason says why, for logs and kube-inject's messages.
	Reason string
	// Warnings are things the user should know about (conflicting or
	// unreadable injection settings); the webhook returns them to the client.
	Warnings []string
}

// parseInject reads a sidecar.istio.io/inject value: true, false, or neither.
func parseInject(v string) (value, known bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "true", "on":
		return true, true
	case "n", "no", "false", "off":
		return false, true
	}
	return false, false
}

// decide applies Istio's policy to a pod in namespace ns. The namespace's
// own labels are the webhook configuration's business (its
// namespaceSelector); here: the ignored namespaces, hostNetwork, an
// injection that already happened, the pod's label (which wins over its
// annotation), the policy and the selectors.
func decide(pod *corev1.Pod, ns string, s *settings) Decision {
	var d Decision
	if ignoredNamespaces[ns] {
		d.Reason = fmt.Sprintf("namespace %s is never injected", ns)
		return d
	}
	if pod.Spec.HostNetwork {
		d.Reason = "pod uses the host network"
		return d
	}
	if _, ok := pod.Annotations[annotation.SidecarStatus.Name]; ok {
		d.Reason = "pod is already injected (" + annotation.SidecarStatus.Name + " is set)"
		return d
	}
	key := annotation.SidecarInject.Name
	lv, hasLabel := pod.Labels[key]
	av, hasAnno := pod.Annotations[key]
	raw, source := av, "annotation"
	if hasLabel {
		raw, source = lv, "label"
		if hasAnno {
			l, lok := parseInject(lv)
			a, aok := parseInject(av)
			if lok != aok || l != a {
				d.Warnings = append(d.Warnings, fmt.Sprintf("%s: label %q and annotation %q disagree; the label wins", key, lv, av))
			}
		}
	}
	explicit, known := parseInject(raw)
	if (hasLabel || hasAnno) && !known {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s: %s value %q is not true or false; treated as false", key, source, raw))
		d.Reason = fmt.Sprintf("%s %s %q is not true", key, source, raw)
		return d
	}
	podLabels := labels.Set(pod.Labels)
	switch {
	case known && explicit:
		d.Inject, d.Reason = true, fmt.Sprintf("%s %s is true", key, source)
	case known:
		d.Reason = fmt.Sprintf("%s %s is false", key, source)
	case s.policy == PolicyEnabled:
		d.Inject, d.Reason = true, "injection policy is enabled"
		for _, sel := range s.never {
			if sel.Matches(podLabels) {
				d.Inject, d.Reason = false, "pod matches neverInjectSelector "+sel.String()
				break
			}
		}
	default:
		d.Reason = "injection policy is disabled"
		for _, sel := range s.always {
			if sel.Matches(podLabels) {
				d.Inject, d.Reason = true, "pod matches alwaysInjectSelector "+sel.String()
				break
			}
		}
	}
	return d
}
