package gen_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// echoMesh is one service with an HTTP, a gRPC and a TCP port and two
// pods: v1 has a sidecar (tlsMode istio), v2 has none.
const echoMesh = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec:
  clusterIP: 10.96.7.7
  selector: {app: echo}
  ports:
  - {name: http, port: 8080}
  - {name: grpc, port: 7070}
  - {name: tcp, port: 9000}
---
apiVersion: v1
kind: Pod
metadata: {name: echo-v1, namespace: default, labels: {app: echo, version: v1, security.istio.io/tlsMode: istio}}
spec: {serviceAccountName: echo, containers: [{name: app, image: app}]}
status: {podIP: 127.0.0.71}
---
apiVersion: v1
kind: Pod
metadata: {name: echo-v2, namespace: default, labels: {app: echo, version: v2}}
spec: {serviceAccountName: echo-legacy, containers: [{name: app, image: app}]}
status: {podIP: 127.0.0.72}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: default, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 7070}, {name: tcp, port: 9000}]
endpoints:
- {addresses: ["127.0.0.71"], conditions: {ready: true}, targetRef: {kind: Pod, name: echo-v1}}
- {addresses: ["127.0.0.72"], conditions: {ready: true}, targetRef: {kind: Pod, name: echo-v2}}
`

const echoHost = "echo.default.svc.cluster.local"

// echoRule is a DestinationRule for echo with subsets v1 and v2; spec is
// indented YAML under spec: after host and before subsets, sub1 and sub2
// the subsets' extra fields (trafficPolicy), each indented by 4.
func echoRule(spec, sub1, sub2 string) string {
	return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: echo
` + spec + `  subsets:
  - name: v1
    labels: {version: v1}
` + sub1 + `  - name: v2
    labels: {version: v2}
` + sub2
}

// echoInputs parses the mesh and yaml into inputs.
func echoInputs(t testing.TB, yaml ...string) *model.Inputs {
	t.Helper()
	in := &model.Inputs{}
	for i, y := range append([]string{echoMesh}, yaml...) {
		objs, errs := file.Parse("doc"+string(rune('0'+i))+".yaml", []byte(y))
		if len(errs) > 0 {
			t.Fatal(errors.Join(errs...))
		}
		for _, o := range objs {
			switch v := o.(type) {
			case *corev1.Service:
				in.Services = append(in.Services, v)
			case *corev1.Pod:
				in.Pods = append(in.Pods, model.PodOf(v))
			case *discoveryv1.EndpointSlice:
				in.EndpointSlices = append(in.EndpointSlices, v)
			case *networking.DestinationRule:
				in.DestinationRules = append(in.DestinationRules, v)
			default:
				t.Fatalf("unexpected %T", o)
			}
		}
	}
	return in
}

// echoClusterNames are the outbound clusters of echo (every port, subset).
func echoClusterNames() []string {
	var out []string
	for _, p := range []uint16{7070, 8080, 9000} {
		for _, s := range []string{"", "v1", "v2"} {
			out = append(out, model.ClusterName(p, s, echoHost))
		}
	}
	return out
}

var clusterCases = []struct {
	name string
	rule string
}{
	{"no-rule", ""},
	{"simple-lb", echoRule(`  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmupDurationSecs: 30s}
    portLevelSettings:
    - port: {number: 9000}
      loadBalancer: {simple: RANDOM}
`, `    trafficPolicy:
      loadBalancer:
        simple: LEAST_REQUEST
        warmup: {duration: 10s, minimumPercent: 20, aggression: 2}
`, `    trafficPolicy:
      loadBalancer: {simple: PASSTHROUGH}
`)},
	{"consistent-hash", echoRule(`  trafficPolicy:
    loadBalancer:
      consistentHash:
        httpHeaderName: x-user
        ringHash: {minimumRingSize: 4096}
`, `    trafficPolicy:
      loadBalancer:
        consistentHash: {httpHeaderName: x-user, maglev: {tableSize: 65537}}
`, `    trafficPolicy:
      loadBalancer:
        consistentHash: {useSourceIp: true}
`)},
	{"outlier", echoRule(`  trafficPolicy:
    outlierDetection:
      consecutive5xxErrors: 3
      consecutiveGatewayErrors: 0
      interval: 5s
      baseEjectionTime: 60s
      maxEjectionPercent: 50
      minHealthPercent: 25
      splitExternalLocalOriginErrors: true
      consecutiveLocalOriginFailures: 2
`, `    trafficPolicy:
      outlierDetection: {consecutiveGatewayErrors: 4, interval: 1s}
`, "")},
	{"connection-pool", echoRule(`  trafficPolicy:
    retryBudget: {percent: 25, minRetryConcurrency: 5, budgetInterval: 10s}
    connectionPool:
      tcp:
        maxConnections: 100
        connectTimeout: 2s
        maxConnectionDuration: 3600s
        tcpKeepalive: {probes: 3, time: 600s, interval: 75s}
      http:
        http1MaxPendingRequests: 10
        http2MaxRequests: 50
        maxRetries: 2
        idleTimeout: 30s
        maxRequestsPerConnection: 5
        maxConcurrentStreams: 20
        http2KeepAlive: {interval: 10s, timeout: 3s}
    portLevelSettings:
    - port: {number: 8080}
      connectionPool:
        http: {h2UpgradePolicy: UPGRADE, http2MaxRequests: 7}
`, `    trafficPolicy:
      connectionPool:
        http: {useClientProtocol: true, idleTimeout: 5s}
`, "")},
	{"tls-istio-mutual", echoRule(`  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL, sni: echo.example, subjectAltNames: ["spiffe://cluster.local/ns/default/sa/echo"]}
`, `    trafficPolicy:
      tls: {mode: ISTIO_MUTUAL}
`, `    trafficPolicy:
      tls: {mode: DISABLE}
      proxyProtocol: {version: V2}
`)},
	{"tls-user", echoRule(`  trafficPolicy:
    tls: {mode: SIMPLE, caCertificates: /etc/certs/ca.pem, sni: echo.example, subjectAltNames: [echo.example]}
    portLevelSettings:
    - port: {number: 9000}
      tls: {mode: SIMPLE, insecureSkipVerify: true}
`, `    trafficPolicy:
      tls: {mode: MUTUAL, clientCertificate: /etc/certs/cert.pem, privateKey: /etc/certs/key.pem, caCrl: /etc/certs/crl.pem}
`, `    trafficPolicy:
      tls: {mode: SIMPLE, credentialName: echo-secret}
`)},
	{"subset-merge", echoRule(`  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN}
    outlierDetection: {consecutive5xxErrors: 7}
    connectionPool:
      http: {http2MaxRequests: 100}
`, `    trafficPolicy:
      connectionPool:
        http: {http2MaxRequests: 3}
`, `    trafficPolicy:
      loadBalancer: {simple: RANDOM}
      portLevelSettings:
      - port: {number: 7070}
        connectionPool:
          http: {http2MaxRequests: 9}
`)},
}

var (
	envoyEcho = proxyCase{name: "envoy", id: "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"}
	grpcEcho  = proxyCase{name: "grpc", id: "sidecar~127.0.0.99~client.default~default.svc.cluster.local", meta: map[string]any{"GENERATOR": "grpc"}}
)

// echoClusters generates echo's clusters for proxy c.
func echoClusters(t *testing.T, pc *model.PushContext, c proxyCase) []*anypb.Any {
	t.Helper()
	rs, err := gen.Generate(pc, proxyFor(t, c), gen.ClusterType, echoClusterNames())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*anypb.Any, len(rs))
	for i, r := range rs {
		out[i] = r.Any
	}
	return out
}

// TestClusterPolicyGolden renders echo's clusters, for Envoy and for
// proxyless gRPC, under each rule (and echo's load assignments without
// one), validates every cluster through its Anys and compares with
// testdata/clusters/CASE.golden.json.
func TestClusterPolicyGolden(t *testing.T) {
	for _, tc := range clusterCases {
		t.Run(tc.name, func(t *testing.T) {
			var docs []string
			if tc.rule != "" {
				docs = append(docs, tc.rule)
			}
			pc := model.BuildPushContext(echoInputs(t, docs...), "v1")
			cfg := xdstest.Config{}
			envoy, grpc := echoClusters(t, pc, envoyEcho), echoClusters(t, pc, grpcEcho)
			n := 9 // 3 ports, each with the default cluster and 2 subsets
			if tc.rule == "" {
				n = 3
			}
			if len(envoy) != n || len(grpc) != n {
				t.Fatalf("got %d Envoy and %d gRPC clusters, want %d each", len(envoy), len(grpc), n)
			}
			for _, a := range append(append([]*anypb.Any{}, envoy...), grpc...) {
				if _, err := xdstest.Validate(a, nil); err != nil {
					t.Error(err)
				}
			}
			cfg[gen.ClusterType] = envoy
			if tc.rule == "" {
				rs, err := gen.Generate(pc, proxyFor(t, envoyEcho), gen.EndpointType, []string{model.ClusterName(8080, "", echoHost)})
				if err != nil {
					t.Fatal(err)
				}
				cfg[gen.EndpointType] = []*anypb.Any{rs[0].Any}
			}
			got := renderJSON(t, cfg)
			got = append(got, renderJSON(t, xdstest.Config{gen.ClusterType: grpc})...)
			checkGolden(t, filepath.Join("testdata", "clusters", tc.name+".golden.json"), got, "ClusterPolicyGolden")
		})
	}
}

// decodeClusters unpacks clusters.
func decodeClusters(t *testing.T, as []*anypb.Any) map[string]*clusterv3.Cluster {
	t.Helper()
	out := map[string]*clusterv3.Cluster{}
	for _, a := range as {
		c := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		out[c.GetName()] = c
	}
	return out
}

// upstreamContexts returns every UpstreamTlsContext of a cluster (its
// transport socket and those of its matches).
func upstreamContexts(t *testing.T, c *clusterv3.Cluster) []*tlsv3.UpstreamTlsContext {
	t.Helper()
	var out []*tlsv3.UpstreamTlsContext
	sockets := []*anypb.Any{c.GetTransportSocket().GetTypedConfig()}
	for _, m := range c.GetTransportSocketMatches() {
		sockets = append(sockets, m.GetTransportSocket().GetTypedConfig())
	}
	for _, a := range sockets {
		if a == nil || !strings.HasSuffix(a.GetTypeUrl(), "UpstreamTlsContext") {
			continue
		}
		u := &tlsv3.UpstreamTlsContext{}
		if err := a.UnmarshalTo(u); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// sdsSecrets collects the SDS secret configs inside m.
func sdsSecrets(m protoreflect.Message, out *[]*tlsv3.SdsSecretConfig) {
	if s, ok := m.Interface().(*tlsv3.SdsSecretConfig); ok {
		*out = append(*out, s)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				sdsSecrets(v.List().Get(i).Message(), out)
			}
		case fd.IsMap():
		default:
			sdsSecrets(v.Message(), out)
		}
		return true
	})
}

// TestClusterTLSShapes checks what the TLS of the cases means, beyond the
// goldens: auto mTLS matches only endpoints with a sidecar, explicit
// ISTIO_MUTUAL uses the cluster's SNI and the service identity, DISABLE
// and a credentialName leave plaintext.
func TestClusterTLSShapes(t *testing.T) {
	build := func(rule string) map[string]*clusterv3.Cluster {
		var docs []string
		if rule != "" {
			docs = append(docs, rule)
		}
		return decodeClusters(t, echoClusters(t, model.BuildPushContext(echoInputs(t, docs...), "v1"), envoyEcho))
	}
	auto := build("")
	c := auto[model.ClusterName(8080, "", echoHost)]
	if c.GetTransportSocket() != nil || len(c.GetTransportSocketMatches()) != 2 {
		t.Fatalf("auto mTLS: want two transport socket matches and no socket, got %v", c)
	}
	if got := c.GetTransportSocketMatches()[0].GetMatch().GetFields()["tlsMode"].GetStringValue(); got != "istio" {
		t.Errorf("first match tlsMode = %q, want istio", got)
	}
	u := upstreamContexts(t, c)[0]
	wantSANs := []string{"spiffe://cluster.local/ns/default/sa/echo", "spiffe://cluster.local/ns/default/sa/echo-legacy"}
	var sans []string
	for _, m := range u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames() {
		sans = append(sans, m.GetExact())
	}
	if diff := cmp.Diff(wantSANs, sans); diff != "" {
		t.Errorf("auto mTLS SANs (-want +got):\n%s", diff)
	}
	if u.GetSni() != "outbound_.8080_._."+echoHost {
		t.Errorf("auto mTLS SNI = %q", u.GetSni())
	}
	if got := upstreamContexts(t, auto[model.ClusterName(7070, "", echoHost)])[0].GetCommonTlsContext().GetAlpnProtocols(); !cmp.Equal(got, []string{"istio-peer-exchange", "istio", "h2"}) {
		t.Errorf("gRPC port ALPN = %v, want in-mesh h2", got)
	}

	explicit := build(clusterCases[5].rule)
	v1 := explicit[model.ClusterName(8080, "v1", echoHost)]
	if v1.GetTransportSocket() == nil || len(v1.GetTransportSocketMatches()) != 0 {
		t.Fatalf("explicit ISTIO_MUTUAL: want one transport socket, got %v", v1)
	}
	if sni := upstreamContexts(t, v1)[0].GetSni(); sni != "outbound_.8080_.v1_."+echoHost {
		t.Errorf("subset SNI = %q", sni)
	}
	if sni := upstreamContexts(t, explicit[model.ClusterName(8080, "", echoHost)])[0].GetSni(); sni != "echo.example" {
		t.Errorf("rule SNI = %q, want echo.example", sni)
	}
	if v2 := explicit[model.ClusterName(8080, "v2", echoHost)]; v2.GetTransportSocket().GetName() != "envoy.transport_sockets.upstream_proxy_protocol" ||
		len(v2.GetTransportSocketMatches()) != 0 || len(upstreamContexts(t, v2)) != 0 {
		t.Errorf("DISABLE with proxyProtocol: want plaintext behind a PROXY header, got %v", v2)
	}
	user := build(clusterCases[6].rule)
	if v2 := user[model.ClusterName(8080, "v2", echoHost)]; v2.GetTransportSocket() != nil || len(v2.GetTransportSocketMatches()) != 0 {
		t.Errorf("credentialName on a sidecar: want no TLS (as Istio), got %v", v2)
	}
}

// TestUnhonouredPolicy checks what is reported as not translated.
func TestUnhonouredPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string
		grpc bool
		want []string
	}{
		{"envoy simple lb: all honoured", clusterCases[1].rule, false, nil},
		{"grpc simple lb", clusterCases[1].rule, true, []string{
			"trafficPolicy.loadBalancer.warmup: gRPC clients have no slow start",
			"trafficPolicy.portLevelSettings[0].loadBalancer.simple: RANDOM is not implemented by gRPC clients: ROUND_ROBIN",
			"subsets[0].trafficPolicy.loadBalancer.warmup: gRPC clients have no slow start",
			"subsets[1].trafficPolicy.loadBalancer.simple: PASSTHROUGH is not implemented by gRPC clients: ROUND_ROBIN",
		}},
		{"grpc maglev", clusterCases[2].rule, true, []string{
			"subsets[0].trafficPolicy.loadBalancer.consistentHash.maglev: gRPC clients have no Maglev: RING_HASH (default ring size)",
		}},
		{"envoy credentialName", clusterCases[6].rule, false, []string{
			`subsets[1].trafficPolicy.tls.credentialName: "echo-secret" is not read by sidecars: the cluster has no TLS (as in Istio for rules without a workloadSelector)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := echoInputs(t, tc.rule)
			got := gen.UnhonouredPolicy(in.DestinationRules[0], tc.grpc)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
