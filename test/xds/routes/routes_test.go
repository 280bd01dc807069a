package routes_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// echoMesh is one service "echo" of backends a (version v1) and b
// (version v2) in namespace ns, with subsets v1 and v2, and a
// VirtualService of the given http routes (YAML, indented as list items
// under spec.http).
func echoMesh(t *testing.T, ns, httpRoutes string) (*proxylesstest.Mesh, *proxylesstest.Backend, *proxylesstest.Backend) {
	t.Helper()
	m := proxylesstest.NewMesh(t)
	a := proxylesstest.StartBackend(t, "127.0.0.61", "a", "version=v1")
	b := proxylesstest.StartBackend(t, "127.0.0.62", "b", "version=v2")
	m.Write("echo.yaml", proxylesstest.Service("echo", ns, 7070, a, b)...)
	m.Write("dr.yaml", fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: %s}
spec:
  host: echo.%s.svc.cluster.local
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}`, ns, ns))
	if httpRoutes != "" {
		m.Write("vs.yaml", vsDoc(ns, httpRoutes))
	}
	return m, a, b
}

func vsDoc(ns, httpRoutes string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: %s}
spec:
  hosts: [echo.%s.svc.cluster.local]
  http:
%s`, ns, ns, httpRoutes)
}

// dial starts istiod on m and returns a client of echo.ns:7070.
func dial(t *testing.T, m *proxylesstest.Mesh, ns string) testpb.TestServiceClient {
	t.Helper()
	d := m.Start(nil)
	return proxylesstest.Client(t, d.Addr("grpc"), proxylesstest.Target("echo", ns, 7070), ns)
}

func TestFaultAbort(t *testing.T) {
	for _, c := range []struct {
		name  string
		abort string
		want  codes.Code
	}{
		{"grpc status", "grpcStatus: UNAVAILABLE", codes.Unavailable},
		{"grpc status permission denied", "grpcStatus: PERMISSION_DENIED", codes.PermissionDenied},
		{"http status", "httpStatus: 503", codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, a, b := echoMesh(t, "fault-abort", fmt.Sprintf(`  - fault:
      abort: {%s, percentage: {value: 100}}
    route:
    - destination: {host: echo}`, c.abort))
			cl := dial(t, m, "fault-abort")
			for range 5 {
				_, err := proxylesstest.Call(t.Context(), cl)
				if got := status.Code(err); got != c.want {
					t.Fatalf("call: %v, want code %v", err, c.want)
				}
			}
			if n := a.Calls.Load() + b.Calls.Load(); n != 0 {
				t.Errorf("backends got %d calls, want none (aborted by the client)", n)
			}
		})
	}
}

// TestFaultAbortPercentage aborts about half the calls.
func TestFaultAbortPercentage(t *testing.T) {
	m, _, _ := echoMesh(t, "fault-pct", `  - fault:
      abort: {grpcStatus: UNAVAILABLE, percentage: {value: 50}}
    route:
    - destination: {host: echo}`)
	cl := dial(t, m, "fault-pct")
	// Wait for the route: the first aborted call.
	polltest.Within(t, 15*time.Second, "an aborted call", func() bool {
		_, err := proxylesstest.Call(t.Context(), cl)
		return status.Code(err) == codes.Unavailable
	})
	const n = 200
	aborted := 0
	for range n {
		_, err := proxylesstest.Call(t.Context(), cl)
		switch status.Code(err) {
		case codes.OK:
		case codes.Unavailable:
			aborted++
		default:
			t.Fatalf("call: %v", err)
		}
	}
	// Binomial(200, 0.5): outside [60, 140] has probability below 1e-8.
	if aborted < 60 || aborted > 140 {
		t.Errorf("%d of %d calls aborted, want about half", aborted, n)
	}
}

func TestFaultDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	m, a, _ := echoMesh(t, "fault-delay", `  - fault:
      delay: {fixedDelay: 0.3s, percentage: {value: 100}}
    route:
    - destination: {host: echo, subset: v1}`)
	cl := dial(t, m, "fault-delay")
	for range 3 {
		start := time.Now()
		name, err := proxylesstest.Call(t.Context(), cl)
		if err != nil || name != "a" {
			t.Fatalf("call: %q, %v", name, err)
		}
		if took := time.Since(start); took < delay {
			t.Errorf("call took %v, want at least the injected %v", took, delay)
		}
	}
	if a.Calls.Load() != 3 {
		t.Errorf("backend got %d calls, want 3 (delayed, not aborted)", a.Calls.Load())
	}
}

// TestTimeout: the route's timeout becomes the deadline of calls that have
// none, so a slow backend answers DEADLINE_EXCEEDED.
func TestTimeout(t *testing.T) {
	m, a, _ := echoMesh(t, "timeout", `  - timeout: 0.2s
    route:
    - destination: {host: echo, subset: v1}`)
	var sawDeadline atomic.Bool
	a.SetReply(func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); ok {
			sawDeadline.Store(true)
		}
		<-ctx.Done()
		return ctx.Err()
	})
	cl := dial(t, m, "timeout")
	// No deadline of the caller's own: only the route's can end the call.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := cl.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.WaitForReady(true))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call: %v, want DEADLINE_EXCEEDED", err)
	}
	if !sawDeadline.Load() {
		t.Error("the backend saw no deadline: the client did not send the route's timeout")
	}
}

// TestRetries: a backend failing its first call with UNAVAILABLE is
// retried, and the caller sees the second answer.
func TestRetries(t *testing.T) {
	m, a, _ := echoMesh(t, "retries", `  - retries: {attempts: 3, retryOn: unavailable}
    route:
    - destination: {host: echo, subset: v1}`)
	var first atomic.Bool
	a.SetReply(func(context.Context) error {
		if first.CompareAndSwap(false, true) {
			return status.Error(codes.Unavailable, "first attempt fails")
		}
		return nil
	})
	cl := dial(t, m, "retries")
	name, err := proxylesstest.Call(t.Context(), cl)
	if err != nil || name != "a" {
		t.Fatalf("call: %q, %v; want a retried answer from a", name, err)
	}
	if got := a.Calls.Load(); got != 2 {
		t.Errorf("backend got %d calls, want 2 (one failed, one retried)", got)
	}
}

// TestRetriesByDefault: a route that says nothing of retries takes
// Istio's default, which retries UNAVAILABLE twice, so a backend that
// always fails is called three times; a route with attempts 0 does not
// retry, and the failure shows at once.
func TestRetriesByDefault(t *testing.T) {
	for _, c := range []struct {
		name    string
		retries string
		calls   int64
	}{
		{"default", "", 3},
		{"off", "    retries: {attempts: 0}\n", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := "retries-" + c.name
			m, a, _ := echoMesh(t, ns, "  - route:\n    - destination: {host: echo, subset: v1}\n"+c.retries)
			a.SetReply(func(context.Context) error { return status.Error(codes.Unavailable, "fails") })
			cl := dial(t, m, ns)
			if _, err := proxylesstest.Call(t.Context(), cl); status.Code(err) != codes.Unavailable {
				t.Fatalf("call: %v, want UNAVAILABLE", err)
			}
			if got := a.Calls.Load(); got != c.calls {
				t.Errorf("backend got %d calls, want %d", got, c.calls)
			}
		})
	}
}

const method = "/grpc.testing.TestService/UnaryCall"

// TestMatch routes by header and by the gRPC method's path.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes string
		md     []string
		want   string
	}{
		{"header exact", `  - match: [{headers: {x-user: {exact: tester}}}]
    route: [{destination: {host: echo, subset: v2}}]
  - route: [{destination: {host: echo, subset: v1}}]`, []string{"x-user", "tester"}, "b"},
		{"header not matching", `  - match: [{headers: {x-user: {exact: tester}}}]
    route: [{destination: {host: echo, subset: v2}}]
  - route: [{destination: {host: echo, subset: v1}}]`, []string{"x-user", "other"}, "a"},
		{"header prefix", `  - match: [{headers: {x-user: {prefix: test}}}]
    route: [{destination: {host: echo, subset: v2}}]
  - route: [{destination: {host: echo, subset: v1}}]`, []string{"x-user", "tester"}, "b"},
		{"uri exact", `  - match: [{uri: {exact: /grpc.testing.TestService/EmptyCall}}]
    route: [{destination: {host: echo, subset: v1}}]
  - match: [{uri: {exact: ` + method + `}}]
    route: [{destination: {host: echo, subset: v2}}]`, nil, "b"},
		{"uri prefix", `  - match: [{uri: {prefix: /grpc.testing.Other/}}]
    route: [{destination: {host: echo, subset: v2}}]
  - match: [{uri: {prefix: /grpc.testing.TestService/}}]
    route: [{destination: {host: echo, subset: v1}}]`, nil, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _, _ := echoMesh(t, "match", c.routes)
			cl := dial(t, m, "match")
			for range 5 {
				name, err := proxylesstest.Call(t.Context(), cl, c.md...)
				if err != nil || name != c.want {
					t.Fatalf("call: %q, %v; want %q", name, err, c.want)
				}
			}
		})
	}
}

// TestNoRouteMatches: a call no route matches fails; grpc-go reports it
// as UNAVAILABLE.
func TestNoRouteMatches(t *testing.T) {
	m, _, _ := echoMesh(t, "nomatch", `  - match: [{uri: {exact: /grpc.testing.TestService/EmptyCall}}]
    route: [{destination: {host: echo, subset: v1}}]`)
	cl := dial(t, m, "nomatch")
	_, err := proxylesstest.Call(t.Context(), cl)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call: %v, want UNAVAILABLE (no matching route)", err)
	}
}

// TestRegistryOnly: with REGISTRY_ONLY a host outside the registry is
// unreachable. grpc-go fails it whatever the policy (proxyless clients
// have no passthrough), so the test documents that the call fails and
// that a registered host still works under the same Sidecar.
func TestRegistryOnly(t *testing.T) {
	for _, mode := range []string{"REGISTRY_ONLY"} {
		t.Run(mode, func(t *testing.T) {
			ns := "regonly"
			m, _, _ := echoMesh(t, ns, "")
			m.Write("sidecar.yaml", fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: %s}
spec:
  egress: [{hosts: ["./*"]}]
  outboundTrafficPolicy: {mode: %s}`, ns, mode))
			d := m.Start(nil)
			known := proxylesstest.Client(t, d.Addr("grpc"), proxylesstest.Target("echo", ns, 7070), ns)
			if _, err := proxylesstest.Call(t.Context(), known); err != nil {
				t.Fatalf("registered host: %v", err)
			}
			unknown := proxylesstest.Client(t, d.Addr("grpc"), "xds:///unknown.example.com:7070", ns)
			// grpc-go gives up on a listener it was not sent after its
			// resource timer (15 s): longer than Call's 5 s.
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			_, err := unknown.UnaryCall(ctx, &testpb.SimpleRequest{})
			if err == nil {
				t.Fatal("call to a host outside the registry succeeded")
			}
			if status.Code(err) == codes.DeadlineExceeded {
				t.Fatalf("call did not fail fast: %v", err)
			}
			t.Logf("%s: unknown host fails: %v", mode, err)
		})
	}
}
