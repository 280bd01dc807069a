package analysis

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestAnalyzeDomain: hosts are qualified in the inputs' Domain, so a name
// in that domain is known and one in cluster.local is not.
func TestAnalyzeDomain(t *testing.T) {
	docs := reviewsSvc + "---\n" + envoyPod + `---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews, subset: v1}}, {destination: {host: reviews.default.svc.corp.example}}, {destination: {host: reviews.default.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b}
spec: {hosts: [reviews.default.svc.corp.example], http: [{route: [{destination: {host: reviews}}]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec: {host: reviews.default.svc.corp.example, subsets: [{name: v1, labels: {version: v1}}]}
`
	for _, tc := range []struct {
		domain string
		want   []string
	}{
		{"corp.example", []string{
			`Error [IST0109] (VirtualService default/a in:16) VirtualServices default/a,default/b bound to the mesh all define host reviews.default.svc.corp.example; only one of them is used for it. Merge them into one VirtualService.`,
			`Error [IST0101] (VirtualService default/a in:17) Referenced host not found: "reviews.default.svc.cluster.local"`,
			`Error [IST0109] (VirtualService default/b in:22) VirtualServices default/a,default/b bound to the mesh all define host reviews.default.svc.corp.example; only one of them is used for it. Merge them into one VirtualService.`,
		}},
		{"", []string{
			`Warning [IST0174] (DestinationRule default/reviews in:27) DestinationRule host reviews.default.svc.corp.example matches no service in the mesh.`,
			`Error [IST0101] (VirtualService default/a in:17) Referenced host+subset in destinationrule not found: "reviews+v1"`,
			`Error [IST0101] (VirtualService default/a in:17) Referenced host not found: "reviews.default.svc.corp.example"`,
		}},
	} {
		t.Run(model.Domain(tc.domain), func(t *testing.T) {
			s := &Set{}
			s.Domain = tc.domain
			if errs := s.AddYAML("in", []byte(docs), "default"); len(errs) > 0 {
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
