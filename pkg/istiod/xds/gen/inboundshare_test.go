package gen_test

import (
	"bytes"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

const (
	allowRatings = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ratings-viewers, namespace: default}
spec:
  selector: {matchLabels: {app: ratings}}
  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/productpage]}}]}]
`
	strictRatingsV2 = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: ratings-v2, namespace: default}
spec:
  selector: {matchLabels: {version: v2}}
  portLevelMtls: {9080: {mode: STRICT}}
`
)

// TestInboundListenerSharedByPolicies: workloads with the same namespace
// and ports share one inbound listener unless a security policy selects
// them differently: an AuthorizationPolicy, or a PeerAuthentication's
// port-level mode.
func TestInboundListenerSharedByPolicies(t *testing.T) {
	listener := func(pc *model.PushContext, ip string, labels map[string]any) *gen.Resource {
		p := proxyFor(t, proxyCase{id: "sidecar~" + ip + "~w.default~default.svc.cluster.local", meta: map[string]any{"LABELS": labels}})
		rs, err := gen.Generate(pc, p, gen.ListenerType, []string{gen.VirtualInbound})
		if err != nil || len(rs) != 1 {
			t.Fatalf("virtualInbound: %v, %d resources", err, len(rs))
		}
		return rs[0]
	}
	page := map[string]any{"app": "productpage"}
	v1 := map[string]any{"app": "ratings", "version": "v1"}
	v2 := map[string]any{"app": "ratings", "version": "v2"}

	pc := model.BuildPushContext(sampleInputs(t), "1")
	p, r1, r2 := listener(pc, "10.8.0.1", page), listener(pc, "10.8.0.2", v1), listener(pc, "10.8.0.3", v2)
	if r1 != r2 {
		t.Errorf("ratings v1 and v2 (port 9080, http, no policy): listeners %p, %p, want one", r1, r2)
	}
	if p == r1 {
		t.Error("productpage's listener is ratings': its inbound route names the service it serves, as Istio's")
	}

	pc = model.BuildPushContext(sampleInputs(t, allowRatings, strictRatingsV2), "2")
	p2, r1, r2 := listener(pc, "10.8.0.1", page), listener(pc, "10.8.0.2", v1), listener(pc, "10.8.0.3", v2)
	if p2.Hash != p.Hash {
		t.Error("productpage's listener changed, though no policy selects it")
	}
	if r1.Hash == p2.Hash || !bytes.Contains(r1.Any.GetValue(), []byte("ratings-viewers")) {
		t.Error("ratings v1's listener lacks the AuthorizationPolicy that selects it")
	}
	if r2.Hash == r1.Hash {
		t.Error("ratings v2's listener is v1's, though a PeerAuthentication sets STRICT on its port 9080")
	}
}

// TestSidecarsAlikeShareLists: sidecars of one scope whose inbound ports
// are alike get the very same cluster list, and those whose listener is
// alike too (replicas of one service) the very same listener list; a
// sidecar with other inbound ports gets its own.
func TestSidecarsAlikeShareLists(t *testing.T) {
	pc := model.BuildPushContext(sampleInputs(t), "1")
	lists := func(ip string, labels map[string]any) map[string][]*gen.Resource {
		p := proxyFor(t, proxyCase{id: "sidecar~" + ip + "~w.default~default.svc.cluster.local", meta: map[string]any{"LABELS": labels}})
		out := map[string][]*gen.Resource{}
		for _, typ := range []string{gen.ClusterType, gen.ListenerType} {
			rs, err := gen.Generate(pc, p, typ, nil)
			if err != nil || len(rs) == 0 {
				t.Fatalf("%s: %v, %d resources", gen.ShortName(typ), err, len(rs))
			}
			out[typ] = rs
		}
		return out
	}
	page := lists("10.8.0.1", map[string]any{"app": "productpage"})
	ratings := lists("10.8.0.2", map[string]any{"app": "ratings", "version": "v1"})
	ratings2 := lists("10.8.0.4", map[string]any{"app": "ratings", "version": "v2"})
	reviews := lists("10.8.0.3", map[string]any{"app": "reviews", "version": "v1"}) // grpc on 9080
	if &page[gen.ClusterType][0] != &ratings[gen.ClusterType][0] {
		t.Error("CDS: productpage and ratings (http 9080 both) got two lists, want one")
	}
	if &ratings2[gen.ListenerType][0] != &ratings[gen.ListenerType][0] {
		t.Error("LDS: ratings v1 and v2 (one service) got two lists, want one")
	}
	if &reviews[gen.ListenerType][0] == &page[gen.ListenerType][0] {
		t.Error("LDS: reviews (grpc 9080) got productpage's list")
	}
}
