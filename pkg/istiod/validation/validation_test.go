package validation

import (
	"errors"
	"strings"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
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

func TestValidate(t *testing.T) {
	v := &Validator{Subsets: NewStaticSubsets([]*networking.DestinationRule{reviewsDR()}, "")}
	for _, tc := range []struct {
		name string
		doc  string
		want []string // substrings of the error, "" for valid
	}{
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
      weight: 90
    - destination: {host: reviews, subset: v2}
      weight: 20
`, want: []string{"spec.http[0].route[*].weight: 110: weights must add up to 100"}},
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(t, v, tc.doc)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want refused")
			}
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not *Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, e := range ve.Errors {
				var fe *model.FieldError
				if !errors.As(e, &fe) {
					t.Errorf("problem %v is not a field error", e)
				}
			}
		})
	}
}

// TestNoDuplicateReasons: a field istiod's checks and ours both catch is reported once.
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
