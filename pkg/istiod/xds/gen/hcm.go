package gen

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// inboundServerName is the server header Istio's inbound connection
// managers answer with (its outbound ones leave Envoy's, "envoy").
const inboundServerName = "istio-envoy"

// uuidRequestID is Istio's request ID extension: UUIDs, which also decide
// trace sampling.
var uuidRequestID = &hcmv3.RequestIDExtension{TypedConfig: mustAny(&uuidv3.UuidRequestIdConfig{
	UseRequestIdForTraceSampling: wrapperspb.Bool(true),
})}

// sidecarHCM sets on h what Istio 1.31 sets on every connection manager of
// a sidecar, inbound and outbound, and returns h:
//   - WebSocket upgrades allowed, streams never idled out, 100-continue
//     passed on, the remote address not used;
//   - paths normalised as the mesh's pathNormalization says (escaped
//     slashes kept by default);
//   - UUID request IDs;
//   - logs, the mesh's access log (accessLogs);
//   - the mesh proxy config's proxyHeaders: the server header (inbound
//     "istio-envoy"), request IDs, x-forwarded-port, Envoy's debug
//     headers (the router's x-envoy-* headers).
func sidecarHCM(h *hcmv3.HttpConnectionManager, mesh *meshconfig.MeshConfig, logs []*accesslogv3.AccessLog, inbound bool) *hcmv3.HttpConnectionManager {
	h.AccessLog = logs
	h.UseRemoteAddress = wrapperspb.Bool(false)
	h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	h.StreamIdleTimeout = durationpb.New(0)
	h.Proxy_100Continue = true
	h.RequestIdExtension = uuidRequestID
	h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
	h.NormalizePath = wrapperspb.Bool(true)
	switch mesh.GetPathNormalization().GetNormalization() {
	case meshconfig.MeshConfig_ProxyPathNormalization_NONE:
		h.NormalizePath = wrapperspb.Bool(false)
	case meshconfig.MeshConfig_ProxyPathNormalization_MERGE_SLASHES:
		h.MergeSlashes = true
	case meshconfig.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES:
		h.MergeSlashes = true
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD
	}
	ph := mesh.GetDefaultConfig().GetProxyHeaders()
	if inbound {
		h.ServerName = inboundServerName
	}
	if s := ph.GetServer(); s != nil {
		switch {
		case s.GetDisabled().GetValue():
			h.ServerName, h.ServerHeaderTransformation = "", hcmv3.HttpConnectionManager_PASS_THROUGH
		case s.GetValue() != "":
			h.ServerName = s.GetValue()
		}
	}
	if ph.GetRequestId().GetDisabled().GetValue() {
		h.GenerateRequestId = wrapperspb.Bool(false)
	}
	h.AppendXForwardedPort = ph.GetXForwardedPort().GetEnabled().GetValue()
	if ph.GetEnvoyDebugHeaders().GetDisabled().GetValue() && len(h.HttpFilters) > 0 {
		last := len(h.HttpFilters) - 1
		h.HttpFilters = append(h.HttpFilters[:last:last], &hcmv3.HttpFilter{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{SuppressEnvoyHeaders: true})}})
	}
	return h
}
