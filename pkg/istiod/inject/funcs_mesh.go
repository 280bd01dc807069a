package inject

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// builtinProxyConfig is the ProxyConfig istiod and the agent assume when
// the mesh config says nothing (Istio's code defaults); protoToJSON leaves
// fields equal to these out of PROXY_CONFIG.
func builtinProxyConfig() *meshconfig.ProxyConfig {
	return &meshconfig.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		BinaryPath:               "/usr/local/bin/envoy",
		ClusterName:              &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
		DrainDuration:            durationpb.New(45e9),
		TerminationDrainDuration: durationpb.New(5e9),
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshconfig.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         "istiod.istio-system.svc:15012",
		StatNameLength:           189,
		StatusPort:               15020,
	}
}

// withoutDefaults is a copy of pc without the fields equal to the
// built-in defaults (and without an empty proxyMetadata).
func withoutDefaults(pc *meshconfig.ProxyConfig) *meshconfig.ProxyConfig {
	c := proto.Clone(pc).(*meshconfig.ProxyConfig)
	d := builtinProxyConfig()
	if c.ConfigPath == d.ConfigPath {
		c.ConfigPath = ""
	}
	if c.BinaryPath == d.BinaryPath {
		c.BinaryPath = ""
	}
	if c.ControlPlaneAuthPolicy == d.ControlPlaneAuthPolicy {
		c.ControlPlaneAuthPolicy = 0
	}
	if c.GetServiceCluster() == d.GetServiceCluster() {
		if _, ok := c.ClusterName.(*meshconfig.ProxyConfig_ServiceCluster); ok {
			c.ClusterName = nil
		}
	}
	if proto.Equal(c.DrainDuration, d.DrainDuration) {
		c.DrainDuration = nil
	}
	if proto.Equal(c.TerminationDrainDuration, d.TerminationDrainDuration) {
		c.TerminationDrainDuration = nil
	}
	if c.DiscoveryAddress == d.DiscoveryAddress {
		c.DiscoveryAddress = ""
	}
	if proto.Equal(c.EnvoyMetricsService, d.EnvoyMetricsService) {
		c.EnvoyMetricsService = nil
	}
	if proto.Equal(c.EnvoyAccessLogService, d.EnvoyAccessLogService) {
		c.EnvoyAccessLogService = nil
	}
	if proto.Equal(c.Tracing, d.Tracing) {
		c.Tracing = nil
	}
	if c.ProxyAdminPort == d.ProxyAdminPort {
		c.ProxyAdminPort = 0
	}
	if c.StatNameLength == d.StatNameLength {
		c.StatNameLength = 0
	}
	if c.StatusPort == d.StatusPort {
		c.StatusPort = 0
	}
	if proto.Equal(c.Concurrency, d.Concurrency) {
		c.Concurrency = nil
	}
	if len(c.ProxyMetadata) == 0 {
		c.ProxyMetadata = nil
	}
	return c
}

// appendMultusNetwork adds network (NAME or NAMESPACE/NAME) to the
// k8s.v1.cni.cncf.io/networks value have, in have's own form: a JSON list
// gets an object, a comma-separated list a name. A value already naming
// the network, or a JSON list that does not parse, is returned as is.
func appendMultusNetwork(have, network string) string {
	if have == "" {
		return network
	}
	end := strings.LastIndex(have, "]")
	if end < 0 {
		for _, n := range strings.Split(have, ",") {
			if strings.TrimSpace(n) == network {
				return have
			}
		}
		return have + ", " + network
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(have), &list); err != nil {
		return have
	}
	ns, name := "", network
	if i := strings.Index(network, "/"); i >= 0 {
		ns, name = network[:i], network[i+1:]
	}
	for _, n := range list {
		if n["name"] != name {
			continue
		}
		got, _ := n["namespace"].(string)
		if got == ns {
			return have
		}
	}
	entry := fmt.Sprintf(`, {"name": %q}`, name)
	if ns != "" {
		entry = fmt.Sprintf(`, {"name": %q, "namespace": %q}`, name, ns)
	}
	return have[:end] + entry + have[end:]
}

// otelResourceAttributes is OTEL_RESOURCE_ATTRIBUTES for the pod when an
// OpenTelemetry tracing provider of the mesh asks for OpenTelemetry's
// semantic conventions, else "": service.namespace, service.version and
// service.instance.id, each from its resource.opentelemetry.io/
// annotation first, then the namespace, the app.kubernetes.io/version
// label or the only container's image tag and digest, and
// NAMESPACE.$(POD_NAME).FIRST-CONTAINER.
func otelResourceAttributes(mc *meshconfig.MeshConfig, annotations, labels map[string]string,
	namespace string, containers []corev1.Container,
) string {
	on := false
	for _, p := range mc.GetExtensionProviders() {
		if p.GetOpentelemetry().GetServiceAttributeEnrichment() == meshconfig.MeshConfig_ExtensionProvider_OTEL_SEMANTIC_CONVENTIONS &&
			p.GetOpentelemetry() != nil {
			on = true
			break
		}
	}
	if !on {
		return ""
	}
	const res = "resource.opentelemetry.io/"
	var attrs []string
	switch {
	case annotations[res+"service.namespace"] != "":
		attrs = append(attrs, "service.namespace="+annotations[res+"service.namespace"])
	case namespace != "":
		attrs = append(attrs, "service.namespace="+namespace)
	}
	version := annotations[res+"service.version"]
	if version == "" {
		version = labels["app.kubernetes.io/version"]
	}
	if version == "" && len(containers) == 1 {
		tag, digest := imageTagDigest(containers[0].Image)
		switch {
		case tag != "" && digest != "":
			version = tag + "@" + digest
		default:
			version = tag + digest
		}
	}
	if version != "" {
		attrs = append(attrs, "service.version="+version)
	}
	switch {
	case annotations[res+"service.instance.id"] != "":
		attrs = append(attrs, "service.instance.id="+annotations[res+"service.instance.id"])
	case len(containers) > 0:
		attrs = append(attrs, "service.instance.id="+namespace+".$(POD_NAME)."+containers[0].Name)
	}
	return strings.Join(attrs, ",")
}

// imageTagDigest splits [registry[:port]/]name[:tag][@digest].
func imageTagDigest(image string) (tag, digest string) {
	if i := strings.Index(image, "@"); i >= 0 {
		image, digest = image[:i], image[i+1:]
	}
	if c := strings.LastIndex(image, ":"); c > strings.LastIndex(image, "/") {
		tag = image[c+1:]
	}
	return tag, digest
}
