package gen

import (
	"fmt"
	"log/slog"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// reported remembers the security notes already logged, so that a policy
// istiod cannot fully honour is reported once per process, not per push.
var reported sync.Map

// reportOnce logs a note about configuration that cannot be honoured as
// written, once per message and arguments. The generators have no logger
// of their own; notes go to slog's default logger.
func reportOnce(msg string, args ...any) {
	key := msg + fmt.Sprint(args...)
	if _, dup := reported.LoadOrStore(key, true); dup {
		return
	}
	slog.Default().With("component", "xds-security").Warn(msg, args...)
}

// workloadOf names a proxy's workload for policy selection.
func workloadOf(pc *model.PushContext, p *model.Proxy) model.Workload {
	return model.Workload{Namespace: p.Namespace, Labels: p.WorkloadLabels(pc)}
}

// tlsModeLabel is the label the injector puts on workloads with an Istio
// proxy; Istio's clients use mutual TLS to them automatically.
const tlsModeLabel = "security.istio.io/tlsMode"

// grpcServerMode is the mutual TLS mode a proxyless server gets on a
// port. grpc-go cannot tell TLS from plaintext on one port (its filter
// chains match only transport_protocol raw_buffer), so as in Istio
// PERMISSIVE serves plaintext, or mutual TLS when the workload carries
// security.istio.io/tlsMode=istio (its clients then always use it).
func grpcServerMode(pol model.MTLSPolicy, labels map[string]string, port uint32) model.MTLSMode {
	mode := pol.ForPort(port)
	if mode == model.MTLSPermissive {
		if labels[tlsModeLabel] == "istio" {
			return model.MTLSStrict
		}
		return model.MTLSDisable
	}
	return mode
}

// downstreamTLS is a server's mutual TLS: the workload certificate, the
// mesh roots, and a client certificate required. alpn, when set, is
// offered to clients (Envoy sidecars; proxyless servers take none).
func downstreamTLS(common *tlsv3.CommonTlsContext, alpn ...string) *corev3.TransportSocket {
	common.AlpnProtocols = alpn
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.DownstreamTlsContext{CommonTlsContext: common, RequireClientCertificate: wrapperspb.Bool(true)}),
	}}
}
