package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// prober is one original probe in ISTIO_KUBE_APP_PROBERS, in the JSON form
// pilot-agent reads (pkg/agent/config.Prober).
type prober struct {
	HTTPGet        *proberHTTP `json:"httpGet,omitempty"`
	TCPSocket      *proberTCP  `json:"tcpSocket,omitempty"`
	GRPC           *proberGRPC `json:"grpc,omitempty"`
	TimeoutSeconds int32       `json:"timeoutSeconds,omitempty"`
}

type proberHTTP struct {
	Path        string              `json:"path,omitempty"`
	Port        int32               `json:"port"`
	Host        string              `json:"host,omitempty"`
	Scheme      corev1.URIScheme    `json:"scheme,omitempty"`
	HTTPHeaders []corev1.HTTPHeader `json:"httpHeaders,omitempty"`
}

type proberTCP struct {
	Host string `json:"host,omitempty"`
	Port int32  `json:"port"`
}

type proberGRPC struct {
	Port    int32   `json:"port"`
	Service *string `json:"service,omitempty"`
}

// probeRewrite is one probe to send through the agent.
type probeRewrite struct {
	container string
	kind      string // livez, readyz, startupz
	path      string
}

// probesOf returns a container's probes with the agent's name for each.
func probesOf(c *corev1.Container) []struct {
	kind  string
	probe **corev1.Probe
} {
	return []struct {
		kind  string
		probe **corev1.Probe
	}{{"livez", &c.LivenessProbe}, {"readyz", &c.ReadinessProbe}, {"startupz", &c.StartupProbe}}
}

// resolvePort turns a probe's port (number or container port name) into a number.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, p.IntVal > 0 && p.IntVal <= 65535
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// appProbes finds the app containers' HTTP, TCP and gRPC probes that the
// agent will run (unless sidecar.istio.io/rewriteAppHTTPProbers is false or
// the status port is 0) and returns them with ISTIO_KUBE_APP_PROBERS, the
// JSON of their original form keyed by /app-health/<container>/<kind>.
// A probe on a named port the container does not declare is left alone,
// as are exec probes and probes already aimed at the status port.
func appProbes(pod *corev1.Pod, s *settings, status int, skip map[string]bool) ([]probeRewrite, string, error) {
	rewrite := s.rewriteProbes
	if v, ok := pod.Annotations[annotation.SidecarRewriteAppHTTPProbers.Name]; ok {
		b, known := parseInject(v)
		if !known {
			return nil, "", &AnnotationError{Annotation: annotation.SidecarRewriteAppHTTPProbers.Name, Value: v, Err: fmt.Errorf("not true or false")}
		}
		rewrite = b
	}
	if !rewrite || status == 0 {
		return nil, "", nil
	}
	probers := map[string]*prober{}
	var out []probeRewrite
	// Init containers' probes too (native sidecars have them), as Istio.
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for i := range all {
		c := &all[i]
		if skip[c.Name] {
			continue
		}
		for _, p := range probesOf(c) {
			pr := *p.probe
			if pr == nil {
				continue
			}
			orig := &prober{TimeoutSeconds: pr.TimeoutSeconds}
			switch {
			case pr.HTTPGet != nil:
				port, ok := resolvePort(c, pr.HTTPGet.Port)
				if !ok || int(port) == status {
					continue
				}
				orig.HTTPGet = &proberHTTP{Path: pr.HTTPGet.Path, Port: port, Host: pr.HTTPGet.Host, Scheme: pr.HTTPGet.Scheme, HTTPHeaders: pr.HTTPGet.HTTPHeaders}
			case pr.TCPSocket != nil:
				port, ok := resolvePort(c, pr.TCPSocket.Port)
				if !ok {
					continue
				}
				orig.TCPSocket = &proberTCP{Host: pr.TCPSocket.Host, Port: port}
			case pr.GRPC != nil:
				orig.GRPC = &proberGRPC{Port: pr.GRPC.Port, Service: pr.GRPC.Service}
			default:
				continue
			}
			path := "/app-health/" + c.Name + "/" + p.kind
			probers[path] = orig
			out = append(out, probeRewrite{container: c.Name, kind: p.kind, path: path})
		}
	}
	if len(out) == 0 {
		return nil, "", nil
	}
	js, err := json.Marshal(probers) // map keys sorted: stable output
	if err != nil {
		return nil, "", fmt.Errorf("encode app probes: %w", err)
	}
	return out, string(js), nil
}

// rewriteProbes points each found probe at the agent: an HTTP GET of its
// /app-health path on the status port. Timing and thresholds stay.
// Containers are found by name: injection may have reordered them.
func rewriteProbes(spec *corev1.PodSpec, rw []probeRewrite, status int) {
	for _, r := range rw {
		c := find(spec.Containers, r.container)
		if c == nil {
			c = find(spec.InitContainers, r.container)
		}
		if c == nil {
			continue
		}
		for _, p := range probesOf(c) {
			if p.kind != r.kind || *p.probe == nil {
				continue
			}
			np := (*p.probe).DeepCopy()
			// As Istio: an HTTP probe keeps its host and headers (the
			// agent speaks plain HTTP to the kubelet, so HTTPS becomes
			// HTTP); any other becomes a plain GET.
			if g := np.HTTPGet; g != nil {
				g.Path, g.Port = r.path, intstr.FromInt32(int32(status))
				if g.Scheme == corev1.URISchemeHTTPS {
					g.Scheme = corev1.URISchemeHTTP
				}
			} else {
				np.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: r.path, Port: intstr.FromInt32(int32(status)),
				}}
			}
			*p.probe = np
		}
	}
}

// prometheusAnnotations saves the app's own scrape settings for the agent
// to merge (ISTIO_PROMETHEUS_ANNOTATIONS) when metrics merging is on: it
// returns whether to merge and the saved JSON ("" when the app has none).
func prometheusAnnotations(pod *corev1.Pod, s *settings, status int) (bool, string) {
	if !s.promMerge || status == 0 {
		return false, ""
	}
	if v, ok := pod.Annotations[annotation.PrometheusMergeMetrics.Name]; ok && strings.EqualFold(strings.TrimSpace(v), "false") {
		return false, ""
	}
	scrape := pod.Annotations["prometheus.io/scrape"]
	if strings.EqualFold(scrape, "false") {
		return false, ""
	}
	if !strings.EqualFold(scrape, "true") {
		return true, ""
	}
	js, _ := json.Marshal(struct {
		Scrape string `json:"scrape"`
		Path   string `json:"path,omitempty"`
		Port   string `json:"port,omitempty"`
	}{"true", pod.Annotations["prometheus.io/path"], pod.Annotations["prometheus.io/port"]})
	return true, string(js)
}
