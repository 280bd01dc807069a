package gen

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	apinet "istio.io/api/networking/v1alpha3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Upstream TLS for Envoy sidecars, with Istio's secret names and shapes.
const (
	// TLSModeLabel is the pod label saying whether a workload takes Istio
	// mutual TLS ("istio", set by the injector) or not ("disabled").
	TLSModeLabel = "security.istio.io/tlsMode"
	// tlsModeIstio is the label value of workloads with a sidecar.
	tlsModeIstio = "istio"
	// transportSocketMatchKey is the endpoint metadata key Envoy matches
	// transport_socket_matches against.
	transportSocketMatchKey = "envoy.transport_socket_match"
	// tlsModeKey names the endpoint's TLS mode inside that metadata.
	tlsModeKey = "tlsMode"
	// sdsCluster is the bootstrap cluster of the agent's SDS server.
	sdsCluster = "sds-grpc"
	// fileCertPrefix and fileRootPrefix name secrets the agent reads from
	// files mounted in the pod: "file-cert:CERT~KEY" and "file-root:CA"
	// ("file-root:system" is the OS trust bundle).
	fileCertPrefix = "file-cert:"
	fileRootPrefix = "file-root:"
	systemCA       = "system"

	tlsSocketName       = "envoy.transport_sockets.tls"
	rawBufferSocketName = "envoy.transport_sockets.raw_buffer"
)

// ALPN lists: in-mesh with metadata exchange (HTTP/2 adds h2), and h2 for
// user TLS on an HTTP/2 cluster.
var (
	alpnInMesh   = []string{"istio-peer-exchange", "istio"}
	alpnInMeshH2 = []string{"istio-peer-exchange", "istio", "h2"}
	alpnH2       = []string{"h2"}
)

// endpointTLSMode returns an endpoint's TLS mode from its pod's labels
// ("disabled" when the label is missing, as Istio).
func endpointTLSMode(e model.Endpoint) string {
	if m := e.Labels[TLSModeLabel]; m != "" {
		return m
	}
	return "disabled"
}

// endpointMetadata is the metadata an endpoint with a sidecar carries so
// the client's auto-mTLS transport socket match picks mutual TLS for it.
func endpointMetadata(e model.Endpoint) *corev3.Metadata {
	if endpointTLSMode(e) != tlsModeIstio {
		return nil
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		transportSocketMatchKey: {Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}},
	}}
}

// istioSNI is the SNI of Istio mutual TLS to a cluster:
// "outbound_.PORT_.SUBSET_.HOST".
func istioSNI(port uint16, subset, host string) string {
	return fmt.Sprintf("outbound_.%d_.%s_.%s", port, subset, host)
}

// serviceAccounts are the SPIFFE identities of a service's endpoints on
// port, sorted: the names Istio mutual TLS to it accepts.
func serviceAccounts(svc *model.Service, eps []model.Endpoint, trustDomain string) []string {
	var out []string
	for _, e := range eps {
		if e.ServiceAccount != "" {
			out = append(out, fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", trustDomain, svc.Namespace, e.ServiceAccount))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// clusterTLS is what one cluster's TLS is built from.
type clusterTLS struct {
	svc    *model.Service
	port   uint16
	subset string
	policy *apinet.TrafficPolicy
	// eps are the endpoints the cluster sends to (its subset's, on port).
	eps []model.Endpoint
	// nsMode is the PeerAuthentication mode of the service's namespace.
	nsMode model.MTLSMode
	// trustDomain and autoMTLSOn are the mesh config's trustDomain and
	// enableAutoMtls.
	trustDomain string
	autoMTLSOn  bool
}

// autoMTLS reports whether Istio's auto mTLS applies when the rule sets no
// TLS (enableAutoMtls, on by default): not for mesh-external services, nor when the service's namespace
// disables mutual TLS). A passthrough cluster can hold no per-endpoint
// match: mutual TLS only when every endpoint has a sidecar.
func (t clusterTLS) autoMTLS(passthrough bool) bool {
	if !t.autoMTLSOn || t.svc.MeshExternal || t.nsMode == model.MTLSDisable {
		return false
	}
	if passthrough {
		if len(t.eps) == 0 {
			return false
		}
		for _, e := range t.eps {
			if endpointTLSMode(e) != tlsModeIstio {
				return false
			}
		}
	}
	return true
}

// applyTLS sets an Envoy cluster's transport socket from the policy's tls,
// as Istio does. An explicit mode is used as written (ISTIO_MUTUAL gets the
// cluster's SNI and the service's identities unless set); with none, auto
// mTLS sends Istio mutual TLS to endpoints whose metadata says they have a
// sidecar and plaintext to the others, through transport_socket_matches.
// It returns a problem when the settings cannot be applied (the cluster
// then has no TLS, as in Istio).
func applyTLS(b *envoyCluster, t clusterTLS) error {
	tls := t.policy.GetTls()
	passthrough := b.c.GetType() == clusterv3.Cluster_ORIGINAL_DST
	auto := false
	if tls == nil {
		if !t.autoMTLS(passthrough) {
			return nil
		}
		tls, auto = &apinet.ClientTLSSettings{Mode: apinet.ClientTLSSettings_ISTIO_MUTUAL}, true
	}
	var ctx *tlsv3.UpstreamTlsContext
	switch tls.GetMode() {
	case apinet.ClientTLSSettings_DISABLE:
		return nil
	case apinet.ClientTLSSettings_ISTIO_MUTUAL:
		ctx = istioMutualContext(b, t, tls)
	case apinet.ClientTLSSettings_SIMPLE, apinet.ClientTLSSettings_MUTUAL:
		var err error
		if ctx, err = userTLSContext(b, tls); err != nil || ctx == nil {
			return err
		}
	}
	ts := &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}}
	if !auto || passthrough {
		b.c.TransportSocket = ts
		return nil
	}
	b.c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{
		{
			Name:            "tlsMode-" + tlsModeIstio,
			Match:           &structpb.Struct{Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}},
			TransportSocket: ts,
		},
		{
			Name:            "tlsMode-disabled",
			Match:           &structpb.Struct{},
			TransportSocket: rawBufferSocket(),
		},
	}
	return nil
}

func baseTLSContext() *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{
		TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
		TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
	}}
}

// istioMutualContext presents the workload certificate ("default") and
// trusts the mesh roots ("ROOTCA"), both from the agent over SDS, checking
// the server's identity against the rule's subjectAltNames or else the
// service's identities.
func istioMutualContext(b *envoyCluster, t clusterTLS, tls *apinet.ClientTLSSettings) *tlsv3.UpstreamTlsContext {
	sans := tls.GetSubjectAltNames()
	if sans == nil {
		sans = serviceAccounts(t.svc, t.eps, t.trustDomain)
	}
	sni := tls.GetSni()
	if sni == "" {
		sni = istioSNI(t.port, t.subset, t.svc.Hostname)
	}
	common := baseTLSContext()
	common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sdsSecret(certName, true)}
	common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
		DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: exactMatchers(sans)},
		ValidationContextSdsSecretConfig: sdsSecret(rootCertName, true),
	}}
	common.AlpnProtocols = alpnInMesh
	if b.isH2() {
		common.AlpnProtocols = alpnInMeshH2
	}
	return &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: sni}
}

// userTLSContext is SIMPLE or MUTUAL TLS with certificates mounted in the
// pod, which the agent serves over SDS as file-cert:/file-root: secrets
// (Envoy cannot rotate files it reads itself). SNI and the server's name
// are checked by Envoy from the request's host when the rule names
// neither (auto_sni, auto_san_validation). credentialName is not read by
// sidecars without a workloadSelector in Istio, so such a rule gets no TLS.
func userTLSContext(b *envoyCluster, tls *apinet.ClientTLSSettings) (*tlsv3.UpstreamTlsContext, error) {
	if tls.GetCredentialName() != "" {
		return nil, fmt.Errorf("tls.credentialName %q: not read by sidecars (Istio reads it only for rules with a workloadSelector): no TLS", tls.GetCredentialName())
	}
	mutual := tls.GetMode() == apinet.ClientTLSSettings_MUTUAL
	if mutual && (tls.GetClientCertificate() == "" || tls.GetPrivateKey() == "") {
		return nil, fmt.Errorf("tls.mode MUTUAL: clientCertificate %q and privateKey %q must both be set: no TLS", tls.GetClientCertificate(), tls.GetPrivateKey())
	}
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: baseTLSContext(), Sni: tls.GetSni()}
	skipVerify := tls.GetInsecureSkipVerify().GetValue()
	if tls.GetSni() == "" {
		o := b.httpOptions()
		if o.UpstreamHttpProtocolOptions == nil {
			o.UpstreamHttpProtocolOptions = &corev3.UpstreamHttpProtocolOptions{}
		}
		o.UpstreamHttpProtocolOptions.AutoSni = true
		o.UpstreamHttpProtocolOptions.AutoSanValidation = len(tls.GetSubjectAltNames()) == 0 && !skipVerify
	}
	common := ctx.CommonTlsContext
	if mutual {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sdsSecret(fileCertPrefix+tls.GetClientCertificate()+"~"+tls.GetPrivateKey(), false)}
	}
	ca := tls.GetCaCertificates()
	if ca == "" {
		ca = systemCA
	}
	if skipVerify {
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{}
	} else {
		vc := &tlsv3.CertificateValidationContext{MatchSubjectAltNames: exactMatchers(tls.GetSubjectAltNames())}
		if crl := tls.GetCaCrl(); crl != "" {
			vc.Crl = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: crl}}
		}
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         vc,
			ValidationContextSdsSecretConfig: sdsSecret(fileRootPrefix+ca, false),
		}}
	}
	if b.isH2() {
		common.AlpnProtocols = alpnH2
	}
	return ctx, nil
}

// sdsSecret asks the agent's SDS server (the bootstrap's sds-grpc cluster)
// for secret name. The workload certificate and roots wait for no initial
// fetch timeout (0: forever), as Istio writes them.
func sdsSecret(name string, workload bool) *tlsv3.SdsSecretConfig {
	src := &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:                   corev3.ApiConfigSource_GRPC,
			SetNodeOnFirstMessageOnly: true,
			TransportApiVersion:       corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: sdsCluster},
			}}},
		}},
		ResourceApiVersion: corev3.ApiVersion_V3,
	}
	if workload {
		src.InitialFetchTimeout = durationpb.New(0)
	}
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: src}
}

func exactMatchers(names []string) []*matcherv3.StringMatcher {
	if len(names) == 0 {
		return nil
	}
	out := make([]*matcherv3.StringMatcher, len(names))
	for i, n := range names {
		out[i] = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}}
	}
	return out
}
