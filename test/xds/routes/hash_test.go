package routes_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestConsistentHashHeader: a DestinationRule hashing on a header makes
// grpc-go send every call with one value of it to one backend (the route
// carries the hash policy, the cluster the ring hash balancer).
func TestConsistentHashHeader(t *testing.T) {
	for _, c := range []struct {
		name   string
		lb     string
		sticky bool
	}{
		{"hash on x-user", "consistentHash: {httpHeaderName: x-user}", true},
		// The control: round robin spreads one user's calls.
		{"round robin", "simple: ROUND_ROBIN", false},
	} {
		t.Run(c.name, func(t *testing.T) { testHash(t, c.lb, c.sticky) })
	}
}

func testHash(t *testing.T, lb string, sticky bool) {
	const ns = "hash"
	m := proxylesstest.NewMesh(t)
	a := proxylesstest.StartBackend(t, "127.0.0.63", "a")
	b := proxylesstest.StartBackend(t, "127.0.0.64", "b")
	m.Write("echo.yaml", proxylesstest.Service("echo", ns, 7070, a, b)...)
	m.Write("dr.yaml", fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: %s}
spec:
  host: echo.%s.svc.cluster.local
  trafficPolicy:
    loadBalancer: {%s}`, ns, ns, lb))
	cl := dial(t, m, ns)
	// Both backends ready first: a balancer with one ready backend sends
	// everything there, whatever the policy.
	seen, i := map[string]bool{}, 0
	polltest.Within(t, 15*time.Second, "answers from both backends", func() bool {
		i++
		name, err := proxylesstest.Call(t.Context(), cl, "x-user", fmt.Sprintf("warm-%d", i))
		if err == nil {
			seen[name] = true
		}
		return seen["a"] && seen["b"]
	})
	for i := range 6 {
		user := fmt.Sprintf("user-%d", i)
		got := proxylesstest.Tally(t.Context(), cl, 8, "x-user", user)
		if sticky != (len(got) == 1) {
			t.Errorf("%s: answers %v, want all from one backend: %t", user, got, sticky)
		}
		for name := range got {
			if name != "a" && name != "b" {
				t.Errorf("%s: %s", user, name)
			}
		}
	}
}
