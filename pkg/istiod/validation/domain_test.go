package validation

import (
	"testing"

	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// TestDomainSuffix: short hosts of rules and routes are qualified in the
// Validator's domain, so a route's unknown subset is found when the
// DestinationRule names the host short and the route in full, in that
// domain, and not across domains.
func TestDomainSuffix(t *testing.T) {
	route := func(host string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: ` + host + `, subset: v3}}]}]
`
	}
	unknown := []string{"spec.http[0].route[0].destination.subset: v3: unknown subset", "known subsets: v1, v2"}
	for _, tt := range []struct {
		name, suffix string
		tc           testCase
	}{
		{"corp.example, full host", "corp.example", testCase{doc: route("reviews.default.svc.corp.example"), want: unknown}},
		{"corp.example, short host", "corp.example", testCase{doc: route("reviews"), want: unknown}},
		{"corp.example, cluster.local host", "corp.example", testCase{doc: route("reviews.default.svc.cluster.local")}},
		{"default, cluster.local host", "", testCase{doc: route("reviews.default.svc.cluster.local"), want: unknown}},
		{"default, corp.example host", "", testCase{doc: route("reviews.default.svc.corp.example")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := &Validator{DomainSuffix: tt.suffix, Subsets: NewStaticSubsets([]*networking.DestinationRule{reviewsDR()}, tt.suffix)}
			tt.tc.check(t, validate(t, v, tt.tc.doc))
		})
	}
}
