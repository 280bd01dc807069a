// Package mesh is istiod's mesh configuration (Istio's MeshConfig): the
// defaults Istio assumes, the `mesh` document of the `istio` ConfigMap
// (or the file it is mounted as) applied over them with Istio's rules, and
// a watcher that hands every valid change to its subscribers. A document
// that does not parse is refused with the field named, and the current
// configuration kept.
package mesh

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	apinet "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

// DefaultProxyConfig is the defaultConfig Istio assumes.
func DefaultProxyConfig() *meshconfig.ProxyConfig {
	return &meshconfig.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		ClusterName:              &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshconfig.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         "istiod.istio-system.svc:15012",
		BinaryPath:               "/usr/local/bin/envoy",
		StatNameLength:           189,
		StatusPort:               15020,
	}
}

// Default is the mesh configuration Istio assumes where the document says
// nothing (the fields istiod and the injector read, with Istio's values).
func Default() *meshconfig.MeshConfig {
	return &meshconfig.MeshConfig{
		EnableTracing:                  true,
		ProtocolDetectionTimeout:       durationpb.New(0),
		IngressService:                 "istio-ingressgateway",
		IngressControllerMode:          meshconfig.MeshConfig_STRICT,
		IngressClass:                   "istio",
		TrustDomain:                    "cluster.local",
		TrustDomainAliases:             []string{},
		EnableAutoMtls:                 wrapperspb.Bool(true),
		OutboundTrafficPolicy:          &meshconfig.MeshConfig_OutboundTrafficPolicy{Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY},
		InboundTrafficPolicy:           &meshconfig.MeshConfig_InboundTrafficPolicy{Mode: meshconfig.MeshConfig_InboundTrafficPolicy_PASSTHROUGH},
		LocalityLbSetting:              &apinet.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		DefaultConfig:                  DefaultProxyConfig(),
		RootNamespace:                  "istio-system",
		ProxyListenPort:                15001,
		ProxyInboundListenPort:         15006,
		ConnectTimeout:                 durationpb.New(10 * time.Second),
		DefaultServiceExportTo:         []string{"*"},
		DefaultVirtualServiceExportTo:  []string{"*"},
		DefaultDestinationRuleExportTo: []string{"*"},
		DnsRefreshRate:                 durationpb.New(60 * time.Second),
		EnablePrometheusMerge:          wrapperspb.Bool(true),
		DefaultProviders:               &meshconfig.MeshConfig_DefaultProviders{},
	}
}

// Parse applies the mesh document doc (YAML or JSON) over Default with
// Istio's rules: every field the document names replaces the default,
// except defaultConfig, whose fields are applied over the default proxy
// config, and trustDomainAliases, which add to the defaults. Fields this
// version of the mesh API does not know are returned as warnings (Istio
// ignores them too); anything else that does not parse is an error naming
// the field. An empty document is the defaults.
func Parse(doc []byte) (*meshconfig.MeshConfig, []string, error) {
	mc := Default()
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("mesh config: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, nil, fmt.Errorf("mesh config: want a mapping: %w", err)
	}
	warnings, err := overlay(mc.ProtoReflect(), top, "")
	if err != nil {
		return nil, warnings, err
	}
	if f := mc.GetAccessLogFormat(); f != "" && mc.GetAccessLogEncoding() == meshconfig.MeshConfig_JSON {
		var obj map[string]any
		if err := json.Unmarshal([]byte(f), &obj); err != nil {
			warnings = append(warnings, fmt.Sprintf("mesh config: accessLogFormat: %q is not a JSON object (%v); Istio's default JSON fields are logged", f, err))
		}
	}
	return mc, warnings, nil
}

// overlay sets the fields named in fields on m, each decoded on its own
// so that an error names it; defaultConfig is overlaid field by field.
func overlay(m protoreflect.Message, fields map[string]json.RawMessage, prefix string) ([]string, error) {
	desc := m.Descriptor().Fields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var warnings []string
	for _, k := range keys {
		fd := desc.ByJSONName(k)
		if fd == nil {
			fd = desc.ByName(protoreflect.Name(k))
		}
		if fd == nil {
			warnings = append(warnings, fmt.Sprintf("mesh config: %s%s: not a field of this mesh API version; ignored", prefix, k))
			continue
		}
		raw := fields[k]
		if prefix == "" && fd.Name() == "default_config" && string(raw) != "null" {
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(raw, &sub); err != nil {
				return warnings, fmt.Errorf("mesh config: defaultConfig: want a mapping: %w", err)
			}
			w, err := overlay(m.Mutable(fd).Message(), sub, "defaultConfig.")
			warnings = append(warnings, w...)
			if err != nil {
				return warnings, err
			}
			continue
		}
		// Decode the one field through a fresh message of m's type.
		one := m.New()
		wrapped, _ := json.Marshal(map[string]json.RawMessage{k: raw})
		if err := protojson.Unmarshal(wrapped, one.Interface()); err != nil {
			// Unknown nested fields are ignored, as Istio does, with a
			// warning; any other error (a bad enum name, a wrong type) fails.
			one = m.New()
			if !strings.Contains(err.Error(), "unknown field") ||
				(protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(wrapped, one.Interface()) != nil {
				return warnings, fmt.Errorf("mesh config: %s%s: %s: %w", prefix, k, raw, err)
			}
			warnings = append(warnings, fmt.Sprintf("mesh config: %s%s: %v; ignored", prefix, k, err))
		}
		if prefix == "" && fd.Name() == "trust_domain_aliases" {
			merged := append(slices.Clone(m.Interface().(*meshconfig.MeshConfig).GetTrustDomainAliases()),
				one.Interface().(*meshconfig.MeshConfig).GetTrustDomainAliases()...)
			slices.Sort(merged)
			m.Interface().(*meshconfig.MeshConfig).TrustDomainAliases = slices.Compact(merged)
			continue
		}
		if one.Has(fd) {
			m.Set(fd, one.Get(fd))
		} else {
			m.Clear(fd) // null or the zero value: as the document says
		}
	}
	return warnings, nil
}

// Equal reports whether a and b are the same configuration.
func Equal(a, b *meshconfig.MeshConfig) bool { return proto.Equal(a, b) }
