package cni

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/capture"
	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// Annotations and labels that steer capture, as Istio names them.
const (
	AnnotationInject            = "sidecar.istio.io/inject"
	AnnotationStatus            = "sidecar.istio.io/status"
	AnnotationInterceptionMode  = "sidecar.istio.io/interceptionMode"
	AnnotationIncludeOutboundIP = "traffic.sidecar.istio.io/includeOutboundIPRanges"
	AnnotationExcludeOutboundIP = "traffic.sidecar.istio.io/excludeOutboundIPRanges"
	AnnotationIncludeInbound    = "traffic.sidecar.istio.io/includeInboundPorts"
	AnnotationExcludeInbound    = "traffic.sidecar.istio.io/excludeInboundPorts"
	AnnotationIncludeOutbound   = "traffic.sidecar.istio.io/includeOutboundPorts"
	AnnotationExcludeOutbound   = "traffic.sidecar.istio.io/excludeOutboundPorts"
	AnnotationExcludeInterfaces = "traffic.sidecar.istio.io/excludeInterfaces"
	AnnotationRerouteVirtual    = "istio.io/reroute-virtual-interfaces"
	AnnotationKubevirt          = "traffic.sidecar.istio.io/kubevirtInterfaces"
	AnnotationStatusPort        = "status.sidecar.istio.io/port"
)

// Container names the injector uses.
const (
	ProxyContainer = "istio-proxy"
	InitContainer  = "istio-init"
)

// alwaysExcludedInbound are the agent's and Envoy's own ports; the agent's
// status port (15020) moves with the status.sidecar.istio.io/port annotation.
var alwaysExcludedInbound = []ipt.PortRange{ipt.Port(15020), ipt.Port(15021), ipt.Port(15090)}

// Decision is what the plugin does for a pod.
type Decision struct {
	// Redirect is false when the pod's traffic is left alone; Reason says why.
	Redirect bool
	Reason   string
	// Capture is the interception policy when Redirect is set.
	Capture *capture.Config
}

// Decide applies Istio's rules to a pod: skip pods with an istio-init
// container (they program themselves), without an istio-proxy sidecar, with
// DISABLE_ENVOY, with a non-sidecar proxy, with injection turned off, or
// never injected; otherwise build the capture policy from its annotations
// and proxy container. A bad annotation is an error naming it and its value.
func Decide(pod *Pod) (Decision, error) {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == InitContainer {
			return Decision{Reason: "pod has an istio-init container"}, nil
		}
	}
	proxy := findContainer(pod, ProxyContainer)
	if proxy == nil {
		return Decision{Reason: "pod has no istio-proxy container"}, nil
	}
	if envValue(proxy, "DISABLE_ENVOY") == "true" {
		return Decision{Reason: "istio-proxy has DISABLE_ENVOY=true"}, nil
	}
	if len(proxy.Args) >= 2 && proxy.Args[0] == "proxy" && proxy.Args[1] != "sidecar" {
		return Decision{Reason: fmt.Sprintf("istio-proxy runs as %q, not a sidecar", proxy.Args[1])}, nil
	}
	inject, ok := pod.Metadata.Labels[AnnotationInject]
	if !ok {
		inject, ok = pod.Metadata.Annotations[AnnotationInject]
	}
	if ok && strings.EqualFold(inject, "false") {
		return Decision{Reason: "sidecar.istio.io/inject is false"}, nil
	}
	if _, ok := pod.Metadata.Annotations[AnnotationStatus]; !ok {
		return Decision{Reason: "pod has no sidecar.istio.io/status annotation (not injected)"}, nil
	}
	cfg, err := captureConfig(pod, proxy)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Redirect: true, Reason: "injected sidecar", Capture: cfg}, nil
}

func findContainer(pod *Pod, name string) *Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func envValue(c *Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// annotation reads an annotation with a default and parses it, naming it in errors.
func annotation[T any](pod *Pod, key, def string, parse func(string) (T, error)) (T, error) {
	v, ok := pod.Metadata.Annotations[key]
	if !ok {
		v = def
	}
	out, err := parse(v)
	if err != nil {
		return out, fmt.Errorf("annotation %s: %q: %w", key, v, err)
	}
	return out, nil
}

func captureConfig(pod *Pod, proxy *Container) (*capture.Config, error) {
	cfg := capture.Default()
	var err error
	if cfg.InboundMode, err = annotation(pod, AnnotationInterceptionMode, "REDIRECT", capture.ParseMode); err != nil {
		return nil, err
	}
	if cfg.OutboundCIDRs, err = annotation(pod, AnnotationIncludeOutboundIP, "*", capture.ParseCIDRs); err != nil {
		return nil, err
	}
	if cfg.OutboundExcludeCIDR, err = annotation(pod, AnnotationExcludeOutboundIP, "", capture.ParseCIDRList); err != nil {
		return nil, err
	}
	if cfg.InboundPorts, err = annotation(pod, AnnotationIncludeInbound, "*", capture.ParsePorts); err != nil {
		return nil, err
	}
	if cfg.InboundExcludePorts, err = annotation(pod, AnnotationExcludeInbound, "", capture.ParsePortList); err != nil {
		return nil, err
	}
	always := alwaysExcludedInbound
	if v, ok := pod.Metadata.Annotations[AnnotationStatusPort]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q is not a port (0 disables the status server)", AnnotationStatusPort, v)
		}
		always = always[1:] // the status port moves, or with 0 there is none
		if n != 0 {
			always = append([]ipt.PortRange{ipt.Port(uint16(n))}, always...)
		}
	}
	cfg.InboundExcludePorts = mergePorts(cfg.InboundExcludePorts, always)
	if cfg.OutboundPorts, err = annotation(pod, AnnotationIncludeOutbound, "", capture.ParsePortList); err != nil {
		return nil, err
	}
	// Without the annotation Istio's plugin keeps the agent's status port
	// out of outbound capture; with it, the annotation's list alone.
	if cfg.OutboundExcludePorts, err = annotation(pod, AnnotationExcludeOutbound, "15020", capture.ParsePortList); err != nil {
		return nil, err
	}
	if cfg.ExcludeInterfaces, err = annotation(pod, AnnotationExcludeInterfaces, "", capture.ParseInterfaces); err != nil {
		return nil, err
	}
	virtKey := AnnotationRerouteVirtual
	if _, ok := pod.Metadata.Annotations[virtKey]; !ok {
		virtKey = AnnotationKubevirt
	}
	if cfg.VirtualInterfaces, err = annotation(pod, virtKey, "", capture.ParseInterfaces); err != nil {
		return nil, err
	}
	if sc := proxy.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			if *sc.RunAsUser < 0 || *sc.RunAsUser > 1<<32-1 {
				return nil, fmt.Errorf("istio-proxy securityContext.runAsUser: %d is not a uid", *sc.RunAsUser)
			}
			cfg.ProxyUIDs = []uint32{uint32(*sc.RunAsUser)}
			cfg.ProxyGIDs = []uint32{uint32(*sc.RunAsUser)}
		}
		if sc.RunAsGroup != nil {
			if *sc.RunAsGroup < 0 || *sc.RunAsGroup > 1<<32-1 {
				return nil, fmt.Errorf("istio-proxy securityContext.runAsGroup: %d is not a gid", *sc.RunAsGroup)
			}
			cfg.ProxyGIDs = []uint32{uint32(*sc.RunAsGroup)}
		}
	}
	// Read as Istio's plugin reads it: strconv.ParseBool, anything else is false.
	if on, _ := strconv.ParseBool(envValue(proxy, "ISTIO_META_DNS_CAPTURE")); on {
		// The pod's resolv.conf is not visible from the node: capture all of port 53, as Istio's CNI does.
		cfg.RedirectDNS, cfg.CaptureAllDNS = true, true
	}
	if v := envValue(proxy, "ISTIO_DUAL_STACK"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("istio-proxy env ISTIO_DUAL_STACK=%q: want true or false", v)
		}
		cfg.DualStack = b
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func mergePorts(a, b []ipt.PortRange) []ipt.PortRange {
	out := append([]ipt.PortRange(nil), a...)
	for _, p := range b {
		dup := false
		for _, q := range out {
			dup = dup || q == p
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}
