package analysis

import "github.com/skiff-mesh/skiff/pkg/istiod/model"

// Proxy is a kind of data plane istiod configures.
type Proxy int

// The proxy types.
const (
	// Envoy is an Envoy sidecar (pilot-agent + Envoy).
	Envoy Proxy = iota
	// Proxyless is a gRPC application with grpc-go's xDS client (the
	// grpc-agent and grpc-simple injection templates).
	Proxyless
)

// String names the proxy type in messages.
func (p Proxy) String() string {
	if p == Proxyless {
		return "proxyless gRPC (grpc-go)"
	}
	return "Envoy sidecars"
}

// Rule is one row of the support table: a field that istiod accepts but
// the generators do not translate for one proxy type.
type Rule struct {
	// Kind is the resource kind.
	Kind model.Kind
	// Field is the field's path by JSON names, repeated fields without
	// indexes ("spec.http.mirror"); "spec" is the whole resource.
	Field string
	// Values, when set, are the enum values (by name) that are not
	// translated; other values of the field are.
	Values []string
	// Proxy is the proxy type the row is about.
	Proxy Proxy
	// Level is the message's severity: Error where the proxy is less
	// strict than the configuration asks (a security policy not
	// enforced), else Warning.
	Level Level
	// Effect says what happens instead, for the message.
	Effect string
}

// The places a DestinationRule traffic policy can be.
var trafficPolicies = []string{
	"spec.trafficPolicy",
	"spec.trafficPolicy.portLevelSettings",
	"spec.subsets.trafficPolicy",
	"spec.subsets.trafficPolicy.portLevelSettings",
}

// policyRules expands one traffic-policy field (relative, "loadBalancer.x")
// to a row per place a traffic policy can be.
func policyRules(p Proxy, field string, values []string, effect string) []Rule {
	var rs []Rule
	for _, tp := range trafficPolicies {
		rs = append(rs, Rule{Kind: model.KindDestinationRule, Field: tp + "." + field, Values: values, Proxy: p, Level: Warning, Effect: effect})
	}
	return rs
}

// unsetPolicies are the traffic-policy fields neither generator
// translates: the cluster is built as if they were unset.
func unsetPolicies(p Proxy) []Rule {
	const effect = "the cluster is built as if it were unset"
	var rs []Rule
	for _, f := range []string{"loadBalancer.zoneAwareLbSetting", "loadBalancer.warmupDurationSecs", "loadBalancer.warmup"} {
		rs = append(rs, policyRules(p, f, nil, effect)...)
	}
	for _, f := range []string{"tunnel", "proxyProtocol", "retryBudget"} { // not in portLevelSettings
		for _, tp := range []string{"spec.trafficPolicy", "spec.subsets.trafficPolicy"} {
			rs = append(rs, Rule{Kind: model.KindDestinationRule, Field: tp + "." + f, Proxy: p, Level: Warning, Effect: effect})
		}
	}
	return rs
}

func rules(kind model.Kind, p Proxy, level Level, effect string, fields ...string) []Rule {
	var rs []Rule
	for _, f := range fields {
		rs = append(rs, Rule{Kind: kind, Field: f, Proxy: p, Level: level, Effect: effect})
	}
	return rs
}

// Untranslated is the support table: what the generators of this build do
// not translate, per field path and proxy type. Everything else istiod
// reads is translated. Edit it as the generators grow.
var Untranslated = concat(
	// Envoy sidecars.
	rules(model.KindVirtualService, Envoy, Warning, "the route is sent without it",
		"spec.http.directResponse", "spec.http.delegate"),
	policyRules(Envoy, "loadBalancer.localityLbSetting", nil, "endpoints are balanced without locality preference or failover"),
	unsetPolicies(Envoy),
	rules(model.KindSidecar, Envoy, Warning, "ignored: inbound listeners are built as if it were unset",
		"spec.ingress", "spec.inboundConnectionPool"),
	[]Rule{{Kind: model.KindAuthorizationPolicy, Field: "spec.action", Values: []string{"CUSTOM"}, Proxy: Envoy, Level: Error,
		Effect: "the policy is not enforced: no request is sent to the external authorizer"}},

	// Proxyless gRPC.
	rules(model.KindVirtualService, Proxyless, Warning, "grpc-go does not mirror requests",
		"spec.http.mirror", "spec.http.mirrors", "spec.http.mirrorPercentage", "spec.http.mirrorPercent"),
	rules(model.KindVirtualService, Proxyless, Warning, "the route is sent without it",
		"spec.http.rewrite", "spec.http.redirect", "spec.http.corsPolicy", "spec.http.headers", "spec.http.route.headers",
		"spec.http.directResponse", "spec.http.delegate"),
	rules(model.KindVirtualService, Proxyless, Warning, "grpc-go only has HTTP routes; these connections are not routed by it",
		"spec.tcp", "spec.tls"),
	policyRules(Proxyless, "loadBalancer.consistentHash.httpCookie", nil, "grpc-go hashes on a header only; the ring hash has no key"),
	policyRules(Proxyless, "loadBalancer.consistentHash.useSourceIp", nil, "grpc-go hashes on a header only; the ring hash has no key"),
	policyRules(Proxyless, "loadBalancer.consistentHash.httpQueryParameterName", nil, "grpc-go hashes on a header only; the ring hash has no key"),
	policyRules(Proxyless, "loadBalancer.localityLbSetting", nil, "endpoints are balanced without locality preference or failover"),
	unsetPolicies(Proxyless),
	policyRules(Proxyless, "connectionPool.tcp", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
	concat(
		policyRules(Proxyless, "connectionPool.http.http1MaxPendingRequests", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.maxRequestsPerConnection", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.maxRetries", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.idleTimeout", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.h2UpgradePolicy", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.useClientProtocol", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
		policyRules(Proxyless, "connectionPool.http.maxConcurrentStreams", nil, "grpc-go applies only connectionPool.http.http2MaxRequests"),
	),
	policyRules(Proxyless, "tls.mode", []string{"SIMPLE", "MUTUAL"}, "grpc-go supports ISTIO_MUTUAL and DISABLE only; the cluster is sent without this TLS setting"),
	rules(model.KindSidecar, Proxyless, Warning, "proxyless workloads are sent the whole mesh, unscoped", "spec"),
	[]Rule{{Kind: model.KindAuthorizationPolicy, Field: "spec.action", Values: []string{"AUDIT"}, Proxy: Proxyless, Level: Warning,
		Effect: "grpc-go does not audit; requests are not logged by this policy"}},
	[]Rule{{Kind: model.KindAuthorizationPolicy, Field: "spec.action", Values: []string{"CUSTOM"}, Proxy: Proxyless, Level: Error,
		Effect: "the policy is not enforced: no request is sent to the external authorizer"}},
	rules(model.KindRequestAuthentication, Proxyless, Error, "JWTs are not validated for proxyless workloads: this policy is not enforced for them", "spec"),
)

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// UnreadKinds are the Istio kinds istiod does not read, with the
// consequence; any other kind not read gets a generic text.
var UnreadKinds = map[model.Kind]string{
	"EnvoyFilter":   "its patches are not applied to any proxy",
	"WasmPlugin":    "no Wasm extension is loaded",
	"Telemetry":     "proxies keep the default metrics, logs and traces",
	"ProxyConfig":   "proxies keep the mesh's default proxy settings",
	"Gateway":       "istiod configures sidecars and proxyless clients only, no gateway proxies",
	"WorkloadGroup": "no WorkloadEntry is created from it; VM auto-registration is not supported",
}
