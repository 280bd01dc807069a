package file

import (
	"errors"
	"strings"
	"testing"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"port out of range", `apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 70000}]
`, []string{"bad.yaml: document 1 (Service shop/web)", "spec.ports[0].port: 70000: must be in 1..65535"}},
		{"unknown field in a Service", `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {portz: []}
`, []string{"Service default/web", `unknown field "portz"`}},
		{"unknown field in an Istio spec", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r}
spec: {hostz: [a]}
`, []string{"VirtualService default/r", `unknown field "hostz"`}},
		{"weights", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 0}
    - {destination: {host: reviews, subset: v2}}
`, []string{"VirtualService default/r", "spec.http[0].route[*].weight: 0: no destination has a weight"}},
		{"bad enum", `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se}
spec: {hosts: [a.example.com], ports: [{number: 80, name: http}], resolution: MAGIC}
`, []string{"ServiceEntry default/se", "MAGIC"}},
		{"endpoint address", `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: ["10.0.0.300"]}]
`, []string{"EndpointSlice default/s", "endpoints[0].addresses[0]: 10.0.0.300: not an IP address"}},
		{"subset labels", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: d}
spec: {host: reviews, subsets: [{name: v1}]}
`, []string{"DestinationRule default/d", "spec.subsets[0].labels"}},
		{"unsupported kind", `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
`, []string{"Deployment default/x", "not a kind istiod reads"}},
		{"not yaml", "kind: [unclosed\n", []string{"bad.yaml: document 1", "yaml"}},
		{"missing kind", "metadata: {name: x}\n", []string{"apiVersion and kind are required"}},
		{"sidecar host form", `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec: {egress: [{hosts: [reviews]}]}
`, []string{"Sidecar shop/default", "spec.egress[0].hosts[0]: reviews"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := Parse("bad.yaml", []byte(tt.yaml))
			if len(objs) != 0 || len(errs) != 1 {
				t.Fatalf("got %d objects, errors %v; want one error", len(objs), errs)
			}
			var oe *ObjectError
			if !errors.As(errs[0], &oe) {
				t.Fatalf("error %T is not an *ObjectError", errs[0])
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q does not mention %q", errs[0], w)
				}
			}
		})
	}
}

func TestParseKeepsValidDocuments(t *testing.T) {
	yaml := `# comment only
---
apiVersion: v1
kind: Service
metadata: {name: good}
spec: {clusterIP: 10.0.0.1, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: bad}
spec: {clusterIP: banana}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: x}
spec: {host: good.default.svc.cluster.local}
`
	objs, errs := Parse("mixed.yaml", []byte(yaml))
	if len(objs) != 2 || len(errs) != 1 {
		t.Fatalf("got %d objects and errors %v, want 2 objects and 1 error", len(objs), errs)
	}
	if s, ok := objs[0].(*corev1.Service); !ok || s.Name != "good" || s.Namespace != "default" {
		t.Errorf("first object %+v, want Service default/good", objs[0])
	}
	if _, ok := objs[1].(*networking.DestinationRule); !ok {
		t.Errorf("second object %T, want DestinationRule", objs[1])
	}
	if !strings.Contains(errs[0].Error(), "mixed.yaml: document 2 (Service default/bad): spec.clusterIP: banana") {
		t.Errorf("error %q", errs[0])
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"))
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec: {hosts: [a], http: [{route: [{destination: {host: a}, weight: 100}]}]}\n---\n"))
	f.Add([]byte("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, labels: {kubernetes.io/service-name: a}}\naddressType: IPv4\nendpoints: [{addresses: [1.2.3.4]}]\n"))
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: se}\nspec: {hosts: [x.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, errs := Parse("fuzz.yaml", data)
		for _, e := range errs {
			if e == nil || e.Error() == "" {
				t.Fatal("empty error")
			}
		}
		for _, o := range objs {
			if o == nil {
				t.Fatal("nil object")
			}
		}
	})
}

// TestParseDurations: durations in every spelling Istio accepts ("300ms",
// "1h", "1m30s", "0.2s"), and a bad one named with its field.
func TestParseDurations(t *testing.T) {
	objs, errs := Parse("d.yaml", []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r, namespace: default}
spec:
  hosts: [reviews]
  http:
  - timeout: 300ms
    retries: {attempts: 2, perTryTimeout: 1m30s}
    fault: {delay: {fixedDelay: 1h, percentage: {value: 1}}}
    route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bad, namespace: default}
spec:
  hosts: [reviews]
  http:
  - timeout: soon
    route: [{destination: {host: reviews}}]
`))
	if len(objs) != 1 {
		t.Fatalf("want the good VirtualService, got %d objects (errors %v)", len(objs), errs)
	}
	h := objs[0].(*networking.VirtualService).Spec.GetHttp()[0]
	if h.GetTimeout().AsDuration().Milliseconds() != 300 || h.GetRetries().GetPerTryTimeout().AsDuration().Seconds() != 90 ||
		h.GetFault().GetDelay().GetFixedDelay().AsDuration().Hours() != 1 {
		t.Fatalf("durations read as %v", h)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "VirtualService default/bad") || !strings.Contains(errs[0].Error(), "timeout") {
		t.Fatalf("want one error naming the bad VirtualService's timeout, got %v", errs)
	}
}
