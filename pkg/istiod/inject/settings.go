package inject

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"istio.io/api/annotation"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// settings is the typed part of the values that the Go code (not only the
// template) needs, read and checked once per configuration.
type settings struct {
	policy         Policy
	always, never  []labels.Selector
	cni            bool
	cniProvider    string
	statusPort     int
	includeIPs     string
	excludeIPs     string
	includeInbound string
	excludeInbound string
	includeOut     string
	excludeOut     string
	rewriteProbes  bool
	promMerge      bool
	hold           bool
	proxyConfig    *meshconfig.ProxyConfig
	revision       string
	hub, tag       string
	proxyImage     string
	initImage      string
	proxyName      string
	initName       string
	variant        string
	mesh           *meshconfig.MeshConfig
	logLevel       string
	logJSON        bool
	caAddress      string
	readiness      Readiness
	proxyResources map[string]any
}

// valueError names the values key that is wrong.
func valueError(path string, v any, reason string) error {
	return fmt.Errorf("injector values: %s: %v: %s", path, v, reason)
}

func getString(vals map[string]any, def string, path ...string) (string, error) {
	v, ok := lookup(vals, path...)
	if !ok || v == nil {
		return def, nil
	}
	switch t := v.(type) {
	case string:
		return t, nil
	case float64, int, int64, bool:
		return fmt.Sprint(t), nil
	}
	return "", valueError(strings.Join(path, "."), v, "not a string")
}

func getBool(vals map[string]any, def bool, path ...string) (bool, error) {
	v, ok := lookup(vals, path...)
	if !ok || v == nil {
		return def, nil
	}
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, err := strconv.ParseBool(t); err == nil {
			return b, nil
		}
	}
	return false, valueError(strings.Join(path, "."), v, "not a boolean")
}

func getInt(vals map[string]any, def int, path ...string) (int, error) {
	v, ok := lookup(vals, path...)
	if !ok || v == nil {
		return def, nil
	}
	switch t := v.(type) {
	case float64:
		if t == float64(int(t)) {
			return int(t), nil
		}
	case int:
		return t, nil
	case int64:
		return int(t), nil
	case string:
		if n, err := strconv.Atoi(t); err == nil {
			return n, nil
		}
	}
	return 0, valueError(strings.Join(path, "."), v, "not an integer")
}

func newSettings(c *Config) (*settings, error) {
	s := &settings{}
	v := c.Values
	var err error
	str := func(dst *string, def string, path ...string) {
		if err == nil {
			*dst, err = getString(v, def, path...)
		}
	}
	boolean := func(dst *bool, def bool, path ...string) {
		if err == nil {
			*dst, err = getBool(v, def, path...)
		}
	}
	integer := func(dst *int, def int, path ...string) {
		if err == nil {
			*dst, err = getInt(v, def, path...)
		}
	}
	var autoInject, istioNS string
	str(&autoInject, "enabled", "global", "proxy", "autoInject")
	boolean(&s.cni, false, "istio_cni", "enabled")
	if !s.cni {
		boolean(&s.cni, false, "pilot", "cni", "enabled")
	}
	str(&s.cniProvider, "default", "pilot", "cni", "provider")
	integer(&s.statusPort, 15020, "global", "proxy", "statusPort")
	str(&s.includeIPs, "*", "global", "proxy", "includeIPRanges")
	str(&s.excludeIPs, "", "global", "proxy", "excludeIPRanges")
	str(&s.includeInbound, "*", "global", "proxy", "includeInboundPorts")
	str(&s.excludeInbound, "", "global", "proxy", "excludeInboundPorts")
	str(&s.includeOut, "", "global", "proxy", "includeOutboundPorts")
	str(&s.excludeOut, "", "global", "proxy", "excludeOutboundPorts")
	boolean(&s.rewriteProbes, true, "sidecarInjectorWebhook", "rewriteAppHTTPProbe")
	boolean(&s.promMerge, true, "meshConfig", "enablePrometheusMerge")
	boolean(&s.hold, false, "global", "proxy", "holdApplicationUntilProxyStarts")
	str(&s.revision, "", "revision")
	str(&s.hub, "", "global", "hub")
	str(&s.tag, "", "global", "tag")
	str(&s.proxyImage, "proxyv2", "global", "proxy", "image")
	str(&s.initImage, "proxyv2", "global", "proxy_init", "image")
	str(&s.variant, "", "global", "variant")
	str(&s.logLevel, "default:info", "global", "logging", "level")
	boolean(&s.logJSON, false, "global", "logAsJson")
	str(&s.caAddress, "", "global", "caAddress")
	str(&istioNS, "istio-system", "global", "istioNamespace")
	integer(&s.readiness.InitialDelaySeconds, 0, "global", "proxy", "readinessInitialDelaySeconds")
	integer(&s.readiness.PeriodSeconds, 15, "global", "proxy", "readinessPeriodSeconds")
	integer(&s.readiness.FailureThreshold, 4, "global", "proxy", "readinessFailureThreshold")
	if err != nil {
		return nil, err
	}
	if s.statusPort < 0 || s.statusPort > 65535 {
		return nil, valueError("global.proxy.statusPort", s.statusPort, "not a port (0 disables)")
	}
	s.policy = c.Policy
	if s.policy == "" {
		s.policy = Policy(autoInject)
	}
	if s.policy != PolicyEnabled && s.policy != PolicyDisabled {
		return nil, fmt.Errorf("injector config: policy %q: want enabled or disabled", s.policy)
	}
	if s.revision == "" {
		s.revision = "default"
	}
	s.hub = strings.TrimSuffix(s.hub, "/")
	s.proxyName, s.initName = s.proxyImage, s.initImage
	s.proxyImage = imageRef(s.hub, s.proxyImage, imageTag(s.tag, s.variant))
	s.initImage = imageRef(s.hub, s.initImage, imageTag(s.tag, s.variant))
	if s.caAddress == "" {
		name := "istiod"
		if s.revision != "default" {
			name += "-" + s.revision
		}
		s.caAddress = name + "." + istioNS + ".svc:15012"
	}
	if r, ok := lookup(v, "global", "proxy", "resources"); ok && r != nil {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, valueError("global.proxy.resources", r, "not a map")
		}
		s.proxyResources = m
	}
	if s.proxyConfig, err = defaultProxyConfig(v); err != nil {
		return nil, err
	}
	if s.mesh, err = meshFromValues(v); err != nil {
		return nil, err
	}
	if s.always, err = selectors("alwaysInjectSelector", c.AlwaysInjectSelector); err != nil {
		return nil, err
	}
	if s.never, err = selectors("neverInjectSelector", c.NeverInjectSelector); err != nil {
		return nil, err
	}
	return s, nil
}

func selectors(name string, in []metav1.LabelSelector) ([]labels.Selector, error) {
	var out []labels.Selector
	for i := range in {
		sel, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			return nil, fmt.Errorf("injector config: %s[%d]: %w", name, i, err)
		}
		out = append(out, sel)
	}
	return out, nil
}

// imageRef is HUB/IMAGE:TAG, or IMAGE itself when it already names a repository.
func imageRef(hub, image, tag string) string {
	if strings.Contains(image, "/") || hub == "" {
		return image
	}
	ref := hub + "/" + image
	if tag != "" {
		ref += ":" + tag
	}
	return ref
}

// imageTag is tag for an image variant ("distroless", "debug"; ""
// or "default" for the plain image): a known variant suffix on tag is
// replaced, as Istio names its published images.
func imageTag(tag, variant string) string {
	if variant == "" {
		return tag
	}
	for _, known := range []string{"distroless", "debug"} {
		if strings.HasSuffix(tag, "-"+known) {
			tag = strings.TrimSuffix(tag, "-"+known)
			break
		}
	}
	if variant == "default" {
		return tag
	}
	return tag + "-" + variant
}

// podImages are the proxy and init images for a pod: the variant is the
// pod's sidecar.istio.io/proxyImageType, else proxy config's image type,
// else global.variant. The proxyImage annotation still wins (proxyImage).
func (s *settings) podImages(pod *corev1.Pod, pc *meshconfig.ProxyConfig) (proxy, init string) {
	proxyVariant, initVariant := s.variant, s.variant
	if t := pc.GetImage().GetImageType(); t != "" {
		proxyVariant = t
	}
	if t, ok := pod.Annotations[annotation.SidecarProxyImageType.Name]; ok {
		proxyVariant, initVariant = t, t
	}
	return imageRef(s.hub, s.proxyName, imageTag(s.tag, proxyVariant)),
		imageRef(s.hub, s.initName, imageTag(s.tag, initVariant))
}

// defaultProxyConfig reads meshConfig.defaultConfig as a ProxyConfig.
func defaultProxyConfig(v map[string]any) (*meshconfig.ProxyConfig, error) {
	pc := &meshconfig.ProxyConfig{}
	raw, ok := lookup(v, "meshConfig", "defaultConfig")
	if !ok || raw == nil {
		return pc, nil
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, valueError("meshConfig.defaultConfig", raw, err.Error())
	}
	if err := protojson.Unmarshal(js, pc); err != nil {
		return nil, fmt.Errorf("injector values: meshConfig.defaultConfig: %w", err)
	}
	return pc, nil
}
