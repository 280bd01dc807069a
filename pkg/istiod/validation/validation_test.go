package validation

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func gvk(yamlDoc string) schema.GroupVersionKind {
	var h struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = yaml.Unmarshal([]byte(yamlDoc), &h)
	return schema.FromAPIVersionAndKind(h.APIVersion, h.Kind)
}

func validate(t *testing.T, v *Validator, doc string) error {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v.ValidateJSON(gvk(doc), "default", js)
}

func reviewsDR() *networking.DestinationRule {
	dr := &networking.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"}}
	dr.Spec.Host = "reviews"
	dr.Spec.Subsets = []*apinet.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}}, {Name: "v2", Labels: map[string]string{"version": "v2"}}}
	return dr
}

// testCase is a document and the substrings its error must have (none
// for a valid document).
type testCase struct {
	name string
	doc  string
	want []string
}

// check compares err with what tc wants and reports whether tc wants a
// refusal.
func (tc testCase) check(t *testing.T, err error) bool {
	t.Helper()
	if len(tc.want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return false
	}
	if err == nil {
		t.Fatal("accepted, want refused")
	}
	for _, w := range tc.want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	return true
}

// webhookCases are checked by TestValidate at the Webhook level and by
// TestLevels at both.
var webhookCases = []testCase{
	{name: "valid virtual service", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 90
    - destination: {host: reviews, subset: v2}
      weight: 10
`},
	{name: "weights", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 0
    - destination: {host: reviews, subset: v2}
`, want: []string{"spec.http[0].route[*].weight: 0: no destination has a weight"}},
	{name: "retries", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 3, retryOn: "5xx,503,retriable-status-codes,unavailable", perTryTimeout: 2s, backoff: 25ms, retryRemoteLocalities: true}
`},
	{name: "retries off with a policy", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0, retryOn: 5xx}
`, want: []string{"spec.http[0].retries.attempts: 0: retries are off"}},
	{name: "retry conditions and durations", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 2, retryOn: "5xx,bogus, 503,999", perTryTimeout: 1500us, backoff: 0.5ms}
`, want: []string{"spec.http[0].retries.retryOn: bogus: neither", "spec.http[0].retries.retryOn:  503: neither", "spec.http[0].retries.retryOn: 999: neither",
		"spec.http[0].retries.perTryTimeout: 1.5ms: must be whole milliseconds", "spec.http[0].retries.backoff: 500µs: must be at least 1ms"}},
	{name: "relative weights", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 90
    - destination: {host: reviews, subset: v2}
      weight: 20
    - destination: {host: reviews, subset: v2}
      weight: 0
`},
	{name: "unknown subset", doc: `
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews.default.svc.cluster.local, subset: v3}
`, want: []string{"spec.http[0].route[0].destination.subset: v3: unknown subset", "known subsets: v1, v2"}},
	{name: "subset of a host without rules is accepted", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings}
spec:
  hosts: [ratings]
  tcp:
  - route:
    - destination: {host: ratings, subset: v9}
`},
	{name: "malformed hosts and ports", doc: `
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata: {name: bad}
spec:
  hosts: ["foo..bar", "a.*.com", "ok.example.com"]
  http:
  - match: [{uri: {regex: "(("}, port: 70000}]
    route:
    - destination: {host: "reviews_svc", port: {number: 70000}}
    redirect: {uri: /x}
`, want: []string{"spec.hosts[0]: foo..bar: malformed host", "spec.hosts[1]: a.*.com", "spec.http[0].match[0].uri.regex", "spec.http[0].match[0].port: 70000", "spec.http[0].route[0].destination.host: reviews_svc", "destination.port.number: 70000", "both route and redirect"}},
	{name: "unknown field", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: typo}
spec:
  hosts: [reviews]
  htp: []
`, want: []string{"spec: ...: does not parse as VirtualService", "htp"}},
	{name: "destination rule", doc: `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr}
spec:
  host: "*.example..com"
  trafficPolicy:
    portLevelSettings:
    - port: {number: 0}
    outlierDetection: {maxEjectionPercent: 150}
  subsets:
  - name: V1
    labels: {version: v1}
  - name: v2
    labels: {"bad key!": v2}
`, want: []string{"spec.host", "portLevelSettings[0].port.number: 0", "maxEjectionPercent: 150", "spec.subsets[0].name: V1", "spec.subsets[1].labels[bad key!]"}},
	{name: "service entry", doc: `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se}
spec:
  hosts: [api.example.com]
  ports:
  - {number: 443, name: https, protocol: HTTPX}
  - {number: 0, name: zero, protocol: TCP}
  resolution: STATIC
  endpoints:
  - address: 192.0.2.1
    ports: {http: 8080}
`, want: []string{"spec.ports[0].protocol: HTTPX: unknown protocol", "spec.ports[1].number: 0", "spec.endpoints[0].ports[http]"}},
	{name: "sidecar", doc: `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default}
spec:
  ingress:
  - port: {number: 99999, protocol: HTTP, name: http}
    defaultEndpoint: 10.0.0.1:8080
  egress:
  - hosts: ["./*", "istio-system/*", "Bad_NS/foo", "nohost"]
`, want: []string{"spec.ingress[0].port.number: 99999", "spec.ingress[0].defaultEndpoint", "spec.egress[0].hosts[2]", "spec.egress[0].hosts[3]"}},
	{name: "peer authentication", doc: `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: pa}
spec:
  mtls: {mode: STRICT}
  portLevelMtls:
    "8080": {mode: DISABLE}
`, want: []string{"spec.portLevelMtls: {...}: port-level mTLS needs a workload selector"}},
	{name: "peer authentication bad mode", doc: `
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata: {name: pa}
spec:
  mtls: {mode: SOMETIMES}
`, want: []string{"does not parse as PeerAuthentication"}},
	{name: "valid peer authentication", doc: `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: pa}
spec:
  selector: {matchLabels: {app: reviews}}
  mtls: {mode: STRICT}
  portLevelMtls:
    "8080": {mode: PERMISSIVE}
`},
	{name: "gateway syntax only", doc: `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
`},
	{name: "unknown kind passes", doc: `
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: t}
spec: {nonsense: true}
`},
	{name: "missing spec", doc: `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: s}
`, want: []string{"spec: null: required"}},
	{name: "tls route weights and destinations", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tls}
spec:
  hosts: [api.example.com]
  tls:
  - match: [{sniHosts: [api.example.com]}]
    route:
    - destination: {host: a.example.com}
      weight: -5
    - destination: {}
`, want: []string{"spec.tls[0].route[0].weight: -5: must not be negative", `spec.tls[0].route[1].destination.host: "": required`}},
	{name: "mirror needs a host", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: mirror}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    mirror: {subset: v1}
`, want: []string{`spec.http[0].mirror.host: "": required`}},
	{name: "workload entry", doc: `
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: we}
spec:
  labels: {app: vm}
`, want: []string{`spec.address: "": required`}},
}

func TestValidate(t *testing.T) {
	v := &Validator{Subsets: NewStaticSubsets([]*networking.DestinationRule{reviewsDR()}, "")}
	for _, tc := range webhookCases {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(t, v, tc.doc)
			if !tc.check(t, err) {
				return
			}
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not *Error", err)
			}
			for _, e := range ve.Errors {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Errorf("problem %v is not a field error", e)
				}
			}
		})
	}
}

// TestNoDuplicateReasons: a problem both levels check (a destination port)
// is reported once, because each check runs once.
func TestNoDuplicateReasons(t *testing.T) {
	err := validate(t, &Validator{}, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, port: {number: 70000}}
`)
	if err == nil {
		t.Fatal("accepted")
	}
	if n := strings.Count(err.Error(), "destination.port.number"); n != 1 {
		t.Errorf("port problem reported %d times:\n%v", n, err)
	}
}

// parse decodes a document into the typed object the registries hand to
// Accept and, for an Istio kind, the metadata and spec the webhook checks.
// obj is nil for a kind the registries do not read.
func parse(t *testing.T, yamlDoc string) (obj metav1.Object, spec proto.Message) {
	t.Helper()
	switch k := gvk(yamlDoc); k.Group + "/" + k.Kind {
	case "/Service":
		obj = &corev1.Service{}
	case "/Pod":
		obj = &corev1.Pod{}
	case "discovery.k8s.io/EndpointSlice":
		obj = &discoveryv1.EndpointSlice{}
	case NetworkingGroup + "/VirtualService":
		obj = &networking.VirtualService{}
	case NetworkingGroup + "/DestinationRule":
		obj = &networking.DestinationRule{}
	case NetworkingGroup + "/ServiceEntry":
		obj = &networking.ServiceEntry{}
	case NetworkingGroup + "/WorkloadEntry":
		obj = &networking.WorkloadEntry{}
	case NetworkingGroup + "/Sidecar":
		obj = &networking.Sidecar{}
	default:
		return nil, nil
	}
	if err := yaml.Unmarshal([]byte(yamlDoc), obj); err != nil {
		return nil, nil // the webhook reports it; the registries never see it
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	// An Istio object's Spec is the message the webhook checks; Kubernetes
	// specs are not protobuf messages of this API.
	if f := reflect.ValueOf(obj).Elem().FieldByName("Spec"); f.IsValid() {
		spec, _ = f.Addr().Interface().(proto.Message)
	}
	return obj, spec
}

// acceptCases are checked by TestAccept at the Istiod level and by
// TestLevels at both; not lists what only the webhook reports.
var acceptCases = []struct {
	testCase
	not []string
}{
	{testCase: testCase{name: "service port", doc: `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.0.0.1
  ports: [{port: 70000}]
`, want: []string{"spec.ports[0].port: 70000: must be in 1..65535"}}},
	{testCase: testCase{name: "endpoint slice", doc: `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s, namespace: default}
addressType: IPv4
endpoints: [{addresses: [10.0.0.300, "fd00::1"]}]
`, want: []string{`metadata.labels[kubernetes.io/service-name]: "": required`, "endpoints[0].addresses[0]: 10.0.0.300: not an IP address", "endpoints[0].addresses[1]: fd00::1: not IPv4"}}},
	{testCase: testCase{name: "pod", doc: `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
status: {podIP: nope}
`, want: []string{"status.podIP: nope: not an IP address"}}},
	{testCase: testCase{name: "valid pod", doc: `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
status: {podIP: 10.0.0.9}
`}},
	{testCase: testCase{name: "virtual service", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: Bad_Name}
spec:
  hosts: ["foo..bar", ""]
  http:
  - match: [{uri: {}, headers: {x: {}}, method: {regex: "(("}}]
    route:
    - destination: {host: reviews, port: {number: 70000}}
      weight: 90
    - destination: {}
      weight: -1
    timeout: -1s
    retries: {attempts: -1, perTryTimeout: 0.0001s}
  - redirect: {uri: /x}
  tcp:
  - route: []
`, want: []string{
		"metadata.name: Bad_Name", `spec.hosts[1]: "": empty host`,
		"spec.http[0].match[0].uri: {}: one of exact, prefix or regex required", "spec.http[0].match[0].headers[x]: {}",
		"spec.http[0].route[0].destination.port.number: 70000: must be in 1..65535", `spec.http[0].route[1].destination.host: "": required`,
		"spec.http[0].route[1].weight: -1: must not be negative",
		"spec.http[0].timeout: -1s: must not be negative", "spec.http[0].retries.attempts: -1: must not be negative",
		"spec.tcp[0].route: []: at least one destination required",
	}}, not: []string{"foo..bar", "method.regex", "perTryTimeout", "spec.http[1]"}},
	{testCase: testCase{name: "virtual service without routes", doc: `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: empty}
spec:
  tls: [{match: [{sniHosts: ["a..b"]}]}]
`, want: []string{"spec.hosts: []: at least one host required"}}, not: []string{"spec.tls", "http, tcp or tls routes required"}},
	{testCase: testCase{name: "destination rule", doc: `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr}
spec:
  trafficPolicy: {outlierDetection: {maxEjectionPercent: 150}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v1, labels: {version: v2}}
  - {labels: {}}
`, want: []string{`spec.host: "": required`, "spec.subsets[1].name: v1: duplicate subset name", `spec.subsets[2].name: "": required`, "spec.subsets[2].labels: {}: at least one label required"}}, not: []string{"maxEjectionPercent"}},
	{testCase: testCase{name: "service entry", doc: `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se}
spec:
  hosts: ["*", "a..b"]
  addresses: [10.0.0.0/33]
  ports:
  - {number: 0, name: http, protocol: HTTPX, targetPort: 70000}
  - {number: 80, name: http}
  resolution: STATIC
  endpoints:
  - address: example.com
    ports: {http: 0, other: 80}
  - {}
`, want: []string{
		"spec.hosts[0]: *: not a host name", "spec.addresses[0]: 10.0.0.0/33: not an IP address or CIDR",
		"spec.ports[0].number: 0: must be in 1..65535", "spec.ports[0].targetPort: 70000", "spec.ports[1].name: http: duplicate port name",
		"spec.endpoints[0].address: example.com: not an IP address (resolution STATIC)", "spec.endpoints[0].ports[http]: 0: must be in 1..65535",
		`spec.endpoints[1].address: "": required`,
	}}, not: []string{"a..b", "HTTPX", "ports[other]"}},
	{testCase: testCase{name: "static service entry without endpoints", doc: `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se}
spec:
  resolution: STATIC
`, want: []string{"spec.hosts: []: at least one host required", "spec.ports: []: at least one port required", "spec.endpoints: []: resolution STATIC needs endpoints or a workloadSelector"}}},
	{testCase: testCase{name: "sidecar", doc: `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default}
spec:
  ingress: [{port: {number: 99999}}]
  egress:
  - hosts: ["./*", "nohost", "Bad_NS/foo"]
  - port: {number: 80}
`, want: []string{"spec.egress[0].hosts[1]: nohost: want \"namespace/host\"", "spec.egress[1].hosts: []: at least one host required"}}, not: []string{"ingress", "Bad_NS"}},
}

func TestAccept(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			obj, _ := parse(t, tc.doc)
			err := Accept(obj)
			if !tc.check(t, err) {
				return
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("istiod reports %q, a webhook-only problem:\n%v", n, err)
				}
			}
		})
	}
	if err := Accept(&corev1.ConfigMap{}); err == nil || !strings.Contains(err.Error(), "unsupported object type *v1.ConfigMap") {
		t.Errorf("ConfigMap: %v", err)
	}
}

// TestLevels: the webhook refuses every problem istiod would skip an
// object for, with the same message, and reports each problem once.
func TestLevels(t *testing.T) {
	cases := webhookCases
	for _, c := range acceptCases {
		c.name = "istiod " + c.name
		cases = append(cases, c.testCase)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, spec := parse(t, tc.doc)
			if obj == nil {
				t.Skip("not a kind istiod reads")
			}
			err := Accept(obj)
			if spec == nil || err == nil {
				return // the webhook does not see Kubernetes kinds
			}
			var webhook []string
			var ve *Error
			if errors.As((&Validator{}).Validate(metaOf(obj), spec), &ve) {
				for _, e := range ve.Errors {
					webhook = append(webhook, e.Error())
				}
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if !slices.Contains(webhook, e.Error()) {
					t.Errorf("istiod skips the object for %q; the webhook does not refuse it:\n%s", e, strings.Join(webhook, "\n"))
				}
			}
			for i, e := range webhook {
				if slices.Contains(webhook[:i], e) {
					t.Errorf("reported twice: %s", e)
				}
			}
		})
	}
}

// metaOf copies an object's name and namespace, what the webhook's checks read.
func metaOf(obj metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace()}
}
