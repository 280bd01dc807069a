package clusters_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// rule renders a DestinationRule for name.default with trafficPolicy
// (YAML indented by 4).
func rule(name, trafficPolicy string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %s, namespace: default}
spec:
  host: %s.default.svc.cluster.local
  trafficPolicy:
%s`, name, name, trafficPolicy)
}

// mesh starts istiod on service name (port 7070) backed by backends and
// governed by the rule's trafficPolicy, and returns a client of it.
func mesh(t *testing.T, name, trafficPolicy string, backends ...*proxylesstest.Backend) clientFn {
	t.Helper()
	m := proxylesstest.NewMesh(t)
	m.Write(name+".yaml", append(proxylesstest.Service(name, "default", 7070, backends...), rule(name, trafficPolicy))...)
	d := m.Start(nil)
	c := proxylesstest.Client(t, d.Addr("grpc"), proxylesstest.Target(name, "default", 7070), "default")
	return func(ctx context.Context, md ...string) (string, error) { return proxylesstest.Call(ctx, c, md...) }
}

type clientFn func(ctx context.Context, md ...string) (string, error)

// hold makes b keep every call until release is closed (or the call ends).
func hold(b *proxylesstest.Backend, release <-chan struct{}) {
	b.SetReply(func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// TestRingHashSticky: with a consistent hash on a header, every call with
// the same header value reaches the same backend, and different values
// spread over the backends (the route's hash policy and the cluster's
// RING_HASH together).
func TestRingHashSticky(t *testing.T) {
	bs := []*proxylesstest.Backend{
		proxylesstest.StartBackend(t, "127.0.0.111", "a"),
		proxylesstest.StartBackend(t, "127.0.0.112", "b"),
		proxylesstest.StartBackend(t, "127.0.0.113", "c", "security.istio.io/tlsMode=istio"), // its endpoint carries tlsMode metadata
	}
	call := mesh(t, "sticky", `    loadBalancer:
      consistentHash:
        httpHeaderName: x-user
        ringHash: {minimumRingSize: 1024}
`, bs...)
	used := map[string]bool{}
	for u := range 20 {
		user := fmt.Sprintf("user-%d", u)
		first := ""
		for range 10 {
			name, err := call(t.Context(), "x-user", user)
			if err != nil {
				t.Fatalf("%s: %v", user, err)
			}
			if first == "" {
				first = name
			}
			if name != first {
				t.Fatalf("%s: answered by %s and %s, want one backend", user, first, name)
			}
		}
		used[first] = true
	}
	if len(used) < 2 {
		t.Errorf("20 header values all hashed to %v, want them spread over the backends", used)
	}
}

// TestLeastRequest: a backend that holds every call gets fewer new calls
// than one that answers at once (round robin would give both the same).
func TestLeastRequest(t *testing.T) {
	slow := proxylesstest.StartBackend(t, "127.0.0.121", "slow")
	fast := proxylesstest.StartBackend(t, "127.0.0.122", "fast")
	call := mesh(t, "least", `    loadBalancer: {simple: LEAST_REQUEST}
`, slow, fast)
	// Both connections up first: the policy picks among ready backends.
	polltest.Until(t, "calls reaching both backends", func() bool {
		_, _ = call(t.Context())
		return slow.Calls.Load() > 0 && fast.Calls.Load() > 0
	})
	release := make(chan struct{})
	hold(slow, release)
	fast.Calls.Store(0)
	slow.Calls.Store(0)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var fastDone atomic.Int64
	defer func() { cancel(); wg.Wait() }()
	const n = 100
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if name, err := call(ctx); err == nil && name == "fast" {
				fastDone.Add(1)
			}
		}()
		// Each call is placed (held, or answered and finished) before the next.
		polltest.Until(t, fmt.Sprintf("call %d placed", i+1), func() bool {
			return slow.Calls.Load()+fastDone.Load() == int64(i+1)
		})
	}
	if s, f := slow.Calls.Load(), fast.Calls.Load(); s >= f {
		t.Errorf("slow backend got %d of %d calls, fast %d: want fewer on the one holding calls", s, n, f)
	} else {
		t.Logf("slow %d, fast %d", s, f)
	}
	close(release)
}

// TestOutlierEjection: a backend that fails every call is ejected, after
// which every call succeeds on the others.
func TestOutlierEjection(t *testing.T) {
	good1 := proxylesstest.StartBackend(t, "127.0.0.131", "good1")
	good2 := proxylesstest.StartBackend(t, "127.0.0.132", "good2")
	bad := proxylesstest.StartBackend(t, "127.0.0.133", "bad")
	bad.SetReply(func(context.Context) error { return status.Error(codes.Internal, "broken") })
	call := mesh(t, "outlier", `    outlierDetection:
      consecutive5xxErrors: 3
      interval: 1s
      baseEjectionTime: 300s
      maxEjectionPercent: 100
`, good1, good2, bad)
	// Round robin reaches every backend once its connection is up.
	polltest.Until(t, "calls reaching all three backends", func() bool {
		_, _ = call(t.Context())
		return good1.Calls.Load() > 0 && good2.Calls.Load() > 0 && bad.Calls.Load() > 0
	})
	var last map[string]int
	ok := polltest.Wait(polltest.Timeout, func() bool {
		last = tally(t, call, 30)
		return last["good1"]+last["good2"] == 30
	})
	if !ok {
		t.Fatalf("the failing backend was never ejected; last 30 calls: %v", last)
	}
	before := bad.Calls.Load()
	got := tally(t, call, 30)
	if got["good1"]+got["good2"] != 30 || bad.Calls.Load() != before {
		t.Errorf("after ejection: %v (failing backend got %d more), want all 30 on good1 and good2", got, bad.Calls.Load()-before)
	}
	if got["good1"] == 0 || got["good2"] == 0 {
		t.Errorf("after ejection: %v, want both good backends used", got)
	}
}

func tally(t *testing.T, call clientFn, n int) map[string]int {
	out := map[string]int{}
	for range n {
		name, err := call(t.Context())
		if err != nil {
			name = "error: " + status.Code(err).String()
		}
		out[name]++
	}
	return out
}

// TestCircuitBreaker: with http2MaxRequests 1 and one call held by the
// backend, a second concurrent call is refused at once with UNAVAILABLE
// (not left to time out), and capacity returns when the first ends.
func TestCircuitBreaker(t *testing.T) {
	b := proxylesstest.StartBackend(t, "127.0.0.141", "slow")
	call := mesh(t, "breaker", `    connectionPool:
      http: {http2MaxRequests: 1}
`, b)
	if _, err := call(t.Context()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	hold(b, release)
	first := make(chan error, 1)
	go func() {
		_, err := call(t.Context())
		first <- err
	}()
	polltest.Until(t, "the first call held by the backend", func() bool { return b.Calls.Load() == 2 })

	_, err := call(t.Context())
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("second concurrent call: %v, want UNAVAILABLE from the circuit breaker", err)
	}
	if n := b.Calls.Load(); n != 2 {
		t.Errorf("backend saw %d calls, want the refused one not to reach it", n)
	}
	close(release)
	if err := <-first; err != nil { // Call gives up after 5 s
		t.Fatalf("first call: %v", err)
	}
	if _, err := call(t.Context()); err != nil {
		t.Errorf("call after the first ended: %v", err)
	}
}

// TestGRPCAcceptsEveryPolicy: grpc-go takes the cluster istiod generates
// for each kind of policy, including those it cannot honour in full (a
// NACKed cluster fails the call).
func TestGRPCAcceptsEveryPolicy(t *testing.T) {
	for _, tc := range []struct{ name, policy string }{
		{"random", "    loadBalancer: {simple: RANDOM}\n"},
		{"passthrough", "    loadBalancer: {simple: PASSTHROUGH}\n"},
		{"warmup", "    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 10s}}\n"},
		{"maglev", "    loadBalancer: {consistentHash: {httpHeaderName: x-user, maglev: {tableSize: 65537}}}\n"},
		{"source-ip-hash", "    loadBalancer: {consistentHash: {useSourceIp: true}}\n"},
		{"connection-pool", `    connectionPool:
      tcp: {maxConnections: 10, connectTimeout: 2s, tcpKeepalive: {time: 60s}}
      http: {http1MaxPendingRequests: 5, http2MaxRequests: 50, maxRetries: 2, idleTimeout: 30s, maxRequestsPerConnection: 5, h2UpgradePolicy: UPGRADE}
`},
		{"outlier", `    outlierDetection:
      consecutive5xxErrors: 0
      consecutiveGatewayErrors: 2
      interval: 2s
      baseEjectionTime: 10s
      maxEjectionPercent: 150
      minHealthPercent: 50
      splitExternalLocalOriginErrors: true
`},
		{"tls-disable", "    tls: {mode: DISABLE}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := proxylesstest.StartBackend(t, "127.0.0.151", "only")
			call := mesh(t, "accept", tc.policy, b)
			if name, err := call(t.Context(), "x-user", "u"); err != nil || name != "only" {
				t.Fatalf("call: %q, %v", name, err)
			}
		})
	}
}
