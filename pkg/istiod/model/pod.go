package model

import corev1 "k8s.io/api/core/v1"

// InjectTemplatesAnnotation lists a pod's injection templates; grpc-agent
// and grpc-simple make it a proxyless gRPC workload.
const InjectTemplatesAnnotation = "inject.istio.io/templates"

// Pod is what istiod reads of a Kubernetes pod. Endpoints take its labels
// and service account, a proxy its labels, and the analysers its injection
// templates. A registry keeps only this of each pod: a mesh has a pod per
// endpoint, and the whole object (spec, status, the injector's annotations)
// is several times the size.
type Pod struct {
	Name, Namespace string
	Labels          map[string]string
	ServiceAccount  string
	// IPs are the pod's addresses: status.podIPs, and status.podIP if it
	// is not among them.
	IPs []string
	// Templates is the inject.istio.io/templates annotation.
	Templates string
}

// PodOf returns what istiod reads of p. The result shares p's labels map.
func PodOf(p *corev1.Pod) *Pod {
	out := &Pod{
		Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
		ServiceAccount: p.Spec.ServiceAccountName, Templates: p.Annotations[InjectTemplatesAnnotation],
	}
	extra := p.Status.PodIP != "" && !hasPodIP(p.Status.PodIPs, p.Status.PodIP)
	if n := len(p.Status.PodIPs); n > 0 || extra {
		out.IPs = make([]string, 0, n+1)
		if extra {
			out.IPs = append(out.IPs, p.Status.PodIP)
		}
		for _, ip := range p.Status.PodIPs {
			out.IPs = append(out.IPs, ip.IP)
		}
	}
	return out
}

func hasPodIP(ips []corev1.PodIP, ip string) bool {
	for _, x := range ips {
		if x.IP == ip {
			return true
		}
	}
	return false
}

// GetName returns the pod's name.
func (p *Pod) GetName() string { return p.Name }

// GetNamespace returns the pod's namespace.
func (p *Pod) GetNamespace() string { return p.Namespace }
