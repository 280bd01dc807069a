package analysis

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	apinet "istio.io/api/networking/v1alpha3"
	apisec "istio.io/api/security/v1beta1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

const (
	reviewsSvc = `
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec: {ports: [{port: 9080, name: http}]}
`
	envoyPod = `
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default, labels: {app: reviews}}
`
	grpcPod = `
apiVersion: v1
kind: Pod
metadata: {name: grpc, namespace: default, labels: {app: grpc}, annotations: {inject.istio.io/templates: "grpc-agent"}}
`
)

func TestAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name string
		docs []string
		want []string
	}{
		{"destination host exists", []string{reviewsSvc, envoyPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews, subset: v1}}, {destination: {host: reviews.default.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec: {host: reviews.default.svc.cluster.local, subsets: [{name: v1, labels: {version: v1}}]}
`}, nil},
		{"subset missing", []string{reviewsSvc, envoyPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews, subset: v2}}], mirror: {host: reviews, subset: v3}}]
`}, []string{
			`Error [IST0101] (VirtualService default/reviews in:18) Referenced mirror+subset in destinationrule not found: "reviews+v3"`,
			`Error [IST0101] (VirtualService default/reviews in:18) Referenced host+subset in destinationrule not found: "reviews+v2"`,
		}},
		{"destination host missing", []string{reviewsSvc, envoyPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: ratings}}], mirror: {host: shadow.other.svc.cluster.local}}]
  tcp: [{route: [{destination: {host: db}}]}]
`}, []string{
			`Error [IST0101] (VirtualService default/reviews in:18) Referenced mirror host not found: "shadow.other.svc.cluster.local"`,
			`Error [IST0101] (VirtualService default/reviews in:18) Referenced host not found: "ratings"`,
			`Error [IST0101] (VirtualService default/reviews in:19) Referenced host not found: "db"`,
		}},
		{"service entry hosts", []string{envoyPod, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext}
spec: {hosts: ["*.example.com", api.corp], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ext}
spec:
  hosts: [a.example.com]
  tls: [{match: [{sniHosts: [a.example.com]}], route: [{destination: {host: a.example.com}}, {destination: {host: api.corp}}]}]
`}, nil},
		{"mirror for proxyless", []string{reviewsSvc, grpcPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews}}], mirror: {host: reviews}, mirrorPercentage: {value: 5}}]
`}, []string{
			`Warning [SKF0001] (VirtualService default/reviews in:18) spec.http[0].mirror is not translated for proxyless gRPC (grpc-go) (1 pod): grpc-go does not mirror requests`,
			`Warning [SKF0001] (VirtualService default/reviews in:18) spec.http[0].mirrorPercentage is not translated for proxyless gRPC (grpc-go) (1 pod): grpc-go does not mirror requests`,
		}},
		{"mirror for Envoy", []string{reviewsSvc, envoyPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews}}], mirror: {host: reviews}, corsPolicy: {allowOrigins: [{exact: "*"}]}}]
`}, nil},
		{"no workload known: proxyless assumed", []string{reviewsSvc, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  tcp: [{route: [{destination: {host: reviews}}]}]
`}, []string{
			`Warning [SKF0001] (VirtualService default/reviews in:13) spec.tcp[0] is not translated for proxyless gRPC (grpc-go) (assumed: no workload known): grpc-go only has HTTP routes; these connections are not routed by it`,
		}},
		{"destination rule", []string{reviewsSvc, envoyPod, grpcPod, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}, localityLbSetting: {enabled: true}}
    connectionPool: {http: {http2MaxRequests: 10, maxRetries: 3}}
    tls: {mode: SIMPLE}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy: {tls: {mode: ISTIO_MUTUAL}, loadBalancer: {consistentHash: {useSourceIp: true}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: gone}
spec: {host: gone}
`}, []string{
			`Warning [IST0174] (DestinationRule default/gone in:35) DestinationRule host gone matches no service in the mesh.`,
			`Warning [SKF0001] (DestinationRule default/reviews in:30) spec.subsets[0].trafficPolicy.loadBalancer.consistentHash.useSourceIp is not translated for proxyless gRPC (grpc-go) (1 pod): grpc-go hashes on a header only; the ring hash has no key`,
			`Warning [SKF0001] (DestinationRule default/reviews in:25) spec.trafficPolicy.connectionPool.http.maxRetries is not translated for proxyless gRPC (grpc-go) (1 pod): grpc-go applies only connectionPool.http.http2MaxRequests`,
			`Warning [SKF0001] (DestinationRule default/reviews in:24) spec.trafficPolicy.loadBalancer.localityLbSetting is not translated for Envoy sidecars (1 pod): endpoints are balanced without locality preference or failover`,
			`Warning [SKF0001] (DestinationRule default/reviews in:24) spec.trafficPolicy.loadBalancer.localityLbSetting is not translated for proxyless gRPC (grpc-go) (1 pod): endpoints are balanced without locality preference or failover`,
			`Warning [SKF0001] (DestinationRule default/reviews in:26) spec.trafficPolicy.tls.mode SIMPLE is not translated for proxyless gRPC (grpc-go) (1 pod): grpc-go supports ISTIO_MUTUAL and DISABLE only; the cluster is sent without this TLS setting`,
		}},
		{"security policies", []string{envoyPod, grpcPod, `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext-authz}
spec: {action: CUSTOM, provider: {name: opa}, rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: audit, namespace: default}
spec: {action: AUDIT, selector: {matchLabels: {app: reviews}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow}
spec: {rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt}
spec: {jwtRules: [{issuer: example.com}]}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict}
spec: {mtls: {mode: STRICT}}
`}, []string{
			`Error [SKF0001] (AuthorizationPolicy default/ext-authz in:15) spec.action CUSTOM is not translated for Envoy sidecars (1 pod): the policy is not enforced: no request is sent to the external authorizer`,
			`Error [SKF0001] (AuthorizationPolicy default/ext-authz in:15) spec.action CUSTOM is not translated for proxyless gRPC (grpc-go) (1 pod): the policy is not enforced: no request is sent to the external authorizer`,
			`Error [SKF0001] (RequestAuthentication default/jwt in:30) RequestAuthentication is not translated for proxyless gRPC (grpc-go) (1 pod): JWTs are not validated for proxyless workloads: this policy is not enforced for them`,
		}},
		{"policy scope: namespace, root namespace", []string{grpcPod, `
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: web}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: web}
spec: {jwtRules: [{issuer: example.com}]}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: mesh-jwt, namespace: istio-system}
spec: {jwtRules: [{issuer: example.com}]}
`}, []string{
			`Error [SKF0001] (RequestAuthentication istio-system/mesh-jwt in:19) RequestAuthentication is not translated for proxyless gRPC (grpc-go) (1 pod): JWTs are not validated for proxyless workloads: this policy is not enforced for them`,
		}},
		{"sidecar", []string{reviewsSvc, grpcPod, `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default}
spec:
  egress: [{hosts: ["./reviews", "./ratings", "istio-system/*", "*/api.corp"]}]
`}, []string{
			`Warning [SKF0001] (Sidecar default/default in:16) Sidecar is not translated for proxyless gRPC (grpc-go) (1 pod): proxyless workloads are sent the whole mesh, unscoped`,
			`Error [IST0101] (Sidecar default/default in:17) Referenced egress host not found: "./ratings"`,
			`Error [IST0101] (Sidecar default/default in:17) Referenced egress host not found: "*/api.corp"`,
		}},
		{"kinds not read", []string{`
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: istio-system}
spec: {configPatches: []}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec: {}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
`}, []string{
			`Warning [SKF0002] (EnvoyFilter istio-system/lua in:2) istiod does not read EnvoyFilter resources: its patches are not applied to any proxy`,
			`Warning [SKF0002] (Telemetry istio-system/mesh-default in:7) istiod does not read Telemetry resources: proxies keep the default metrics, logs and traces`,
		}},
		{"conflicting hosts and gateways", []string{reviewsSvc, envoyPod, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a}
spec: {hosts: [reviews], http: [{route: [{destination: {host: reviews}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: default}
spec: {hosts: [reviews.default.svc.cluster.local], gateways: [mesh], http: [{route: [{destination: {host: reviews}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: edge}
spec: {hosts: [shop.example.com], gateways: [ingress, istio-system/public], http: [{route: [{destination: {host: reviews}}]}]}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]}
`}, []string{
			`Warning [SKF0002] (Gateway istio-system/public in:28) istiod does not read Gateway resources: istiod configures sidecars and proxyless clients only, no gateway proxies`,
			`Error [IST0109] (VirtualService default/a in:16) VirtualServices default/a,default/b bound to the mesh all define host reviews.default.svc.cluster.local; only one of them is used for it. Merge them into one VirtualService.`,
			`Error [IST0109] (VirtualService default/b in:21) VirtualServices default/a,default/b bound to the mesh all define host reviews.default.svc.cluster.local; only one of them is used for it. Merge them into one VirtualService.`,
			`Warning [SKF0003] (VirtualService default/edge in:26) bound only to gateways ingress,istio-system/public and not to mesh: istiod configures no gateway proxies, so this VirtualService affects no traffic`,
			`Error [IST0101] (VirtualService default/edge in:26) Referenced gateway not found: "ingress"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{}
			if errs := s.AddYAML("in", []byte(strings.Join(tc.docs, "---\n")), "default"); len(errs) > 0 {
				t.Fatal(errs)
			}
			var got []string
			for _, m := range AnalyzeSet(s) {
				got = append(got, m.String())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("messages (-want +got):\n%s", d)
			}
		})
	}
}

// TestSupportTableResolves checks that every row of the support table
// names a field of its kind.
func TestSupportTableResolves(t *testing.T) {
	descs := map[model.Kind]protoreflect.MessageDescriptor{
		model.KindVirtualService:        (&apinet.VirtualService{}).ProtoReflect().Descriptor(),
		model.KindDestinationRule:       (&apinet.DestinationRule{}).ProtoReflect().Descriptor(),
		model.KindSidecar:               (&apinet.Sidecar{}).ProtoReflect().Descriptor(),
		model.KindAuthorizationPolicy:   (&apisec.AuthorizationPolicy{}).ProtoReflect().Descriptor(),
		model.KindRequestAuthentication: (&apisec.RequestAuthentication{}).ProtoReflect().Descriptor(),
	}
	for _, r := range Untranslated {
		d, ok := descs[r.Kind]
		if !ok {
			t.Errorf("%s %s: kind not known to the test", r.Kind, r.Field)
			continue
		}
		if !resolves(d, r.Field) {
			t.Errorf("%s %s: no such field", r.Kind, r.Field)
		}
	}
}

func TestReporterLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(slog.New(slog.NewTextHandler(&buf, nil)))
	a := newMessage(ReferencedResourceNotFound, model.Key{Kind: model.KindVirtualService, Namespace: "default", Name: "a"}, "spec.hosts[0]", "host", "x")
	b := newMessage(UnreadKind, model.Key{Kind: "EnvoyFilter", Namespace: "default", Name: "f"}, "", "EnvoyFilter", "none")
	for i, step := range []struct {
		report []Message
		new    int
	}{{[]Message{a}, 1}, {[]Message{a, a}, 0}, {[]Message{a, b}, 1}, {nil, 0}, {[]Message{a}, 1}} {
		if n := r.Report(step.report); n != step.new {
			t.Errorf("step %d: %d new, want %d", i, n, step.new)
		}
		if got := len(r.Messages()); got != len(step.report) {
			t.Errorf("step %d: %d current, want %d", i, got, len(step.report))
		}
	}
	if n := strings.Count(buf.String(), "code=IST0101"); n != 2 {
		t.Errorf("IST0101 logged %d times, want 2 (once, then again after it went away):\n%s", n, buf.String())
	}
}

func TestForObject(t *testing.T) {
	in := &Set{}
	if errs := in.AddYAML("in", []byte(reviewsSvc+"---\n"+envoyPod+"---\n"+`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec: {hosts: [reviews], http: [{route: [{destination: {host: reviews}}]}]}
`), "default"); len(errs) > 0 {
		t.Fatal(errs)
	}
	// An update of the VirtualService to a missing host: the old version
	// does not count, and nothing about other objects is returned.
	raw := []byte(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews"},
		"spec":{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"ratings"}}]}]}}`)
	k, ms, err := ForObject(&in.Inputs, raw, "default")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Warning())
	}
	want := []string{`IST0101 spec.http[0].route[0].destination.host: Referenced host not found: "ratings"`}
	if k.String() != "VirtualService default/reviews" || !cmp.Equal(got, want) {
		t.Errorf("got %s %q, want %q", k, got, want)
	}
	if len(in.VirtualServices) != 1 || in.VirtualServices[0].Spec.Http[0].Route[0].Destination.Host != "reviews" {
		t.Errorf("inputs modified: %v", in.VirtualServices)
	}
}
