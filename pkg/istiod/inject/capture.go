package inject

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-mesh/skiff/pkg/capture"
)

// Interception modes a pod may ask for with sidecar.istio.io/interceptionMode.
const (
	ModeRedirect = "REDIRECT"
	ModeTProxy   = "TPROXY"
	ModeNone     = "NONE"
)

// AnnotationError is a pod annotation (or label) whose value cannot be used.
// The webhook refuses such a pod with this message.
type AnnotationError struct {
	// Annotation is the annotation's name.
	Annotation string
	// Value is its value.
	Value string
	// Err says what is wrong.
	Err error
}

// Error returns "annotation NAME: "VALUE": reason".
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: %q: %v", e.Annotation, e.Value, e.Err)
}

// Unwrap returns the reason.
func (e *AnnotationError) Unwrap() error { return e.Err }

// annotated returns the pod's annotation or def, and whether the pod set it.
func annotated(pod *corev1.Pod, name, def string) (string, bool) {
	if v, ok := pod.Annotations[name]; ok {
		return v, true
	}
	return def, false
}

// check parses an annotation's value with parse, naming it in the error.
func check[T any](name, v string, parse func(string) (T, error)) error {
	if _, err := parse(v); err != nil {
		return &AnnotationError{Annotation: name, Value: v, Err: err}
	}
	return nil
}

// interceptionMode is the pod's mode: its annotation, else the mesh default.
func interceptionMode(pod *corev1.Pod, s *settings, pcMode string) (string, error) {
	v, set := annotated(pod, annotation.SidecarInterceptionMode.Name, pcMode)
	m := strings.ToUpper(strings.TrimSpace(v))
	switch m {
	case ModeRedirect, ModeTProxy, ModeNone:
		return m, nil
	}
	if !set {
		return "", fmt.Errorf("injector values: meshConfig.defaultConfig.interceptionMode %q: want REDIRECT, TPROXY or NONE", v)
	}
	return "", &AnnotationError{Annotation: annotation.SidecarInterceptionMode.Name, Value: v, Err: fmt.Errorf("want REDIRECT, TPROXY or NONE")}
}

// statusPort is the agent's status port: status.sidecar.istio.io/port, else
// the mesh config's statusPort, else the values' global.proxy.statusPort; 0
// turns probes and merged metrics off.
func statusPort(pod *corev1.Pod, s *settings, pcPort int32) (int, error) {
	v, set := annotated(pod, annotation.SidecarStatusPort.Name, "")
	if !set {
		if pcPort > 0 && pcPort <= 65535 {
			return int(pcPort), nil
		}
		return s.statusPort, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 65535 {
		return 0, &AnnotationError{Annotation: annotation.SidecarStatusPort.Name, Value: v, Err: fmt.Errorf("not a port (0 disables)")}
	}
	return n, nil
}

// initArgs returns the init container's arguments: Istio's injector flags
// (-p 15001 -z 15006 -u 1337 -m MODE -i ... -x ... -b ... -d ...) changed by
// the traffic annotations, each value checked with the parser istio-iptables
// uses, so a bad annotation is refused here instead of failing in the pod.
// With the CNI plugin the same flags run validation only. The result is
// checked once more by parsing it as istio-iptables does, with metadata as
// its environment.
func initArgs(pod *corev1.Pod, s *settings, mode string, status int, metadata map[string]string, uid int64) ([]string, error) {
	if mode == ModeNone {
		return nil, nil
	}
	includeIPs, _ := annotated(pod, annotation.SidecarTrafficIncludeOutboundIPRanges.Name, s.includeIPs)
	excludeIPs, _ := annotated(pod, annotation.SidecarTrafficExcludeOutboundIPRanges.Name, s.excludeIPs)
	includeIn, _ := annotated(pod, annotation.SidecarTrafficIncludeInboundPorts.Name, s.includeInbound)
	excludeIn, _ := annotated(pod, annotation.SidecarTrafficExcludeInboundPorts.Name, s.excludeInbound)
	includeOut, includeOutSet := annotated(pod, annotation.SidecarTrafficIncludeOutboundPorts.Name, s.includeOut)
	excludeOut, excludeOutSet := annotated(pod, annotation.SidecarTrafficExcludeOutboundPorts.Name, s.excludeOut)
	virtName := annotation.IoIstioRerouteVirtualInterfaces.Name
	virt, virtSet := annotated(pod, virtName, "")
	if !virtSet {
		virtName = annotation.SidecarTrafficKubevirtInterfaces.Name
		virt, virtSet = annotated(pod, virtName, "")
	}
	exclIf, exclIfSet := annotated(pod, annotation.SidecarTrafficExcludeInterfaces.Name, "")

	for _, c := range []error{
		check(annotation.SidecarTrafficIncludeOutboundIPRanges.Name, includeIPs, capture.ParseCIDRs),
		check(annotation.SidecarTrafficExcludeOutboundIPRanges.Name, excludeIPs, capture.ParseCIDRList),
		check(annotation.SidecarTrafficIncludeInboundPorts.Name, includeIn, capture.ParsePorts),
		check(annotation.SidecarTrafficExcludeInboundPorts.Name, excludeIn, capture.ParsePortList),
		check(annotation.SidecarTrafficIncludeOutboundPorts.Name, includeOut, capture.ParsePortList),
		check(annotation.SidecarTrafficExcludeOutboundPorts.Name, excludeOut, capture.ParsePortList),
		check(virtName, virt, capture.ParseInterfaces),
		check(annotation.SidecarTrafficExcludeInterfaces.Name, exclIf, capture.ParseInterfaces),
	} {
		if c != nil {
			return nil, c
		}
	}

	// The proxy's own ports are never captured inbound: Envoy's metrics
	// (15090), the agent's readiness (15021) and status port.
	// Istio's order: those two, the excluded ports asked for, then the
	// status port unless that list has it.
	exclude := []string{"15090", "15021"}
	var asked []string
	for _, p := range strings.Split(excludeIn, ",") {
		if p = strings.TrimSpace(p); p != "" {
			asked = append(asked, p)
		}
	}
	exclude = append(exclude, asked...)
	if status != 0 && !slices.Contains(asked, strconv.Itoa(status)) {
		exclude = append(exclude, strconv.Itoa(status))
	}
	// Traffic of the proxy's user is not captured: 1337 with TPROXY (the
	// proxy then runs as root with that group), else the proxy's uid.
	owner := strconv.FormatInt(uid, 10)
	if mode == "TPROXY" {
		owner = "1337"
	}
	args := []string{"istio-iptables",
		"-p", "15001", "-z", "15006", "-u", owner, "-m", mode,
		"-i", strings.TrimSpace(includeIPs), "-x", strings.TrimSpace(excludeIPs),
		"-b", strings.TrimSpace(includeIn), "-d", strings.Join(exclude, ","),
	}
	if includeOutSet || strings.TrimSpace(includeOut) != "" {
		args = append(args, "-q", strings.TrimSpace(includeOut))
	}
	if excludeOutSet || strings.TrimSpace(excludeOut) != "" {
		args = append(args, "-o", strings.TrimSpace(excludeOut))
	}
	if virtSet && strings.TrimSpace(virt) != "" {
		args = append(args, "-k", strings.TrimSpace(virt))
	}
	if exclIfSet && strings.TrimSpace(exclIf) != "" {
		args = append(args, "-c", strings.TrimSpace(exclIf))
	}
	level, _ := annotated(pod, annotation.SidecarAgentLogLevel.Name, s.logLevel)
	args = append(args, "--log_output_level="+level)
	if s.logJSON {
		args = append(args, "--log_as_json")
	}
	if s.cni {
		args = append(args, "--run-validation", "--skip-rule-apply")
	}
	env := capture.Environment{Getenv: func(k string) (string, bool) {
		v, ok := metadata[k]
		return v, ok
	}}
	if _, err := capture.Parse(args[1:], env, io.Discard); err != nil {
		return nil, fmt.Errorf("istio-iptables would refuse the injected arguments %q: %w", args[1:], err)
	}
	return args, nil
}

// cniAnnotations are the traffic settings written on a pod in CNI mode, as
// Istio's template writes them: the node's CNI plugin sees only the pod, so
// the values' cluster-wide defaults must reach it as annotations. Each is
// the pod's own annotation when set, else the values'; the excluded inbound
// ports gain the status port. Empty optional settings are left out. With
// interception mode NONE there is nothing to capture and nothing is written.
func cniAnnotations(pod *corev1.Pod, s *settings, mode string, status int) map[string]string {
	if !s.cni || mode == ModeNone {
		return nil
	}
	out := map[string]string{annotation.SidecarInterceptionMode.Name: mode}
	set := func(name, def string, always bool) {
		v, own := annotated(pod, name, def)
		if always || own || strings.TrimSpace(v) != "" {
			out[name] = v
		}
	}
	set(annotation.SidecarTrafficIncludeOutboundIPRanges.Name, s.includeIPs, false)
	set(annotation.SidecarTrafficExcludeOutboundIPRanges.Name, s.excludeIPs, false)
	set(annotation.SidecarTrafficIncludeInboundPorts.Name, s.includeInbound, true)
	set(annotation.SidecarTrafficIncludeOutboundPorts.Name, s.includeOut, false)
	set(annotation.SidecarTrafficExcludeOutboundPorts.Name, s.excludeOut, false)
	excl, _ := annotated(pod, annotation.SidecarTrafficExcludeInboundPorts.Name, s.excludeInbound)
	out[annotation.SidecarTrafficExcludeInboundPorts.Name] = withPort(excl, status)
	if s.cniProvider == "multus" {
		out[multusNetworks] = appendMultusNetwork(pod.Annotations[multusNetworks], "default/istio-cni")
	}
	return out
}

// multusNetworks is Multus's annotation: the extra networks of a pod, a
// comma list of [NAMESPACE/]NAME or a JSON list of {"name", "namespace"}.
const multusNetworks = "k8s.v1.cni.cncf.io/networks"

// withPort adds port to a comma list of ports unless it is 0 or listed.
func withPort(list string, port int) string {
	if port == 0 {
		return list
	}
	p := strconv.Itoa(port)
	var ports []string
	for _, q := range strings.Split(list, ",") {
		if q = strings.TrimSpace(q); q == p {
			return list
		} else if q != "" {
			ports = append(ports, q)
		}
	}
	return strings.Join(append(ports, p), ",")
}
