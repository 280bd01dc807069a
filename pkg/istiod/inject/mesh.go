package inject

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// builtinMeshConfig is the mesh configuration istiod assumes where the
// mesh config says nothing (the parts templates read).
func builtinMeshConfig() *meshconfig.MeshConfig {
	return &meshconfig.MeshConfig{
		TrustDomain:            "cluster.local",
		RootNamespace:          "istio-system",
		ProxyListenPort:        15001,
		ProxyInboundListenPort: 15006,
		EnablePrometheusMerge:  wrapperspb.Bool(true),
		InboundTrafficPolicy: &meshconfig.MeshConfig_InboundTrafficPolicy{
			Mode: meshconfig.MeshConfig_InboundTrafficPolicy_PASSTHROUGH,
		},
		DefaultConfig: builtinProxyConfig(),
	}
}

// meshFromValues is the values' meshConfig merged over the built-in
// defaults. Fields this version of the mesh API does not know are
// ignored (a newer istioctl's mesh config still injects).
func meshFromValues(v map[string]any) (*meshconfig.MeshConfig, error) {
	mc := builtinMeshConfig()
	raw, ok := lookup(v, "meshConfig")
	if !ok || raw == nil {
		return mc, nil
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, valueError("meshConfig", raw, err.Error())
	}
	var over meshconfig.MeshConfig
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, &over); err != nil {
		return nil, fmt.Errorf("injector values: meshConfig: %w", err)
	}
	proto.Merge(mc, &over)
	return mc, nil
}

// inboundPolicyMode is the mesh's inbound traffic policy as templates
// see it: "localhost" or "passthrough".
func inboundPolicyMode(mc *meshconfig.MeshConfig) string {
	if mc.GetInboundTrafficPolicy().GetMode() == meshconfig.MeshConfig_InboundTrafficPolicy_LOCALHOST {
		return "localhost"
	}
	return "passthrough"
}
