package xds_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// edsRecorder wraps gen.Generate and records the EDS names asked for
// proxyless gRPC clients: what a push can send them.
type edsRecorder struct {
	mu    sync.Mutex
	names [][]string
}

func (r *edsRecorder) generate(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*gen.Resource, error) {
	if p.IsGRPC() && typeURL == gen.EndpointType {
		r.mu.Lock()
		r.names = append(r.names, slices.Clone(names))
		r.mu.Unlock()
	}
	return gen.Generate(pc, p, typeURL, names)
}

// since returns the names asked for after the first n calls.
func (r *edsRecorder) since(n int) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names[n:])
}

func (r *edsRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.names)
}

// frontRouting sends x-to: moved to the moved service, the rest to kept:
// one grpc-go channel, so one xDS client, subscribes to both clusters.
const frontRouting = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: partialeds}
spec:
  hosts: [front]
  http:
  - match: [{headers: {x-to: {exact: moved}}}]
    route: [{destination: {host: moved}}]
  - route: [{destination: {host: kept}}]`

// TestPartialEDSGRPCClient: an endpoint-only change sends a state-of-the-
// world EDS response with the changed ClusterLoadAssignment alone (the xDS
// protocol allows it for EDS and RDS; Istio does the same). grpc-go's own
// xDS client keeps the load assignment the response left out, takes the
// new one, and ACKs the response.
func TestPartialEDSGRPCClient(t *testing.T) {
	const ns, port = "partialeds", 7070
	rec := &edsRecorder{}
	e := newEnvWith(t, xds.Options{Generate: rec.generate})
	k1 := proxylesstest.StartBackend(t, "127.0.0.81", "k1")
	m1 := proxylesstest.StartBackend(t, "127.0.0.82", "m1")
	m2 := proxylesstest.StartBackend(t, "127.0.0.83", "m2")
	moved := proxylesstest.Service("moved", ns, port, m1, m2) // Service, Pod and slice of m1, Pod and slice of m2
	docs := append(proxylesstest.Service("front", ns, port), proxylesstest.Service("kept", ns, port, k1)...)
	docs = append(append(docs, moved[:4]...), frontRouting)
	e.push(t, e.with(t, strings.Join(docs, "\n---\n")))

	builder, err := grpcxds.NewXDSResolverWithConfigForTesting(proxylesstest.Bootstrap(e.addr, "127.0.0.99", ns))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(proxylesstest.Target("front", ns, port),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := testpb.NewTestServiceClient(cc)
	ctx := t.Context()
	if got := proxylesstest.Tally(ctx, c, 5); got["k1"] != 5 {
		t.Fatalf("front answered by %v, want k1 5 times", got)
	}
	if got := proxylesstest.Tally(ctx, c, 5, "x-to", "moved"); got["m1"] != 5 {
		t.Fatalf("front with x-to: moved answered by %v, want m1 5 times", got)
	}
	keptCluster := model.ClusterName(port, "", proxylesstest.Host("kept", ns))
	movedCluster := model.ClusterName(port, "", proxylesstest.Host("moved", ns))
	proxy := "sidecar~127.0.0.99~client." + ns + "~" + ns + ".svc.cluster.local"
	e.waitStatus(t, proxy, "EDS", xds.StatusSynced)
	if got := grpcStatus(t, e, proxy).Resources; got != 2 {
		t.Fatalf("the gRPC client subscribes to %d load assignments, want 2 (%s, %s)", got, keptCluster, movedCluster)
	}
	before := grpcStatus(t, e, proxy)
	calls := rec.count()

	// m2's EndpointSlice: only moved's endpoints change.
	change := e.push(t, e.with(t, moved[4]))
	if change.Full || len(change.Hosts) != 1 {
		t.Fatalf("adding an EndpointSlice made change %+v, want an endpoint-only change of moved", change)
	}
	polltest.Within(t, wait, "m2 answering for moved", func() bool {
		name, err := proxylesstest.Call(ctx, c, "x-to", "moved")
		return err == nil && name == "m2"
	})
	// The response carried moved's load assignment alone.
	pushed := rec.since(calls)
	if len(pushed) == 0 {
		t.Fatal("no EDS generated for the gRPC client after the endpoint change")
	}
	for _, names := range pushed {
		if !slices.Equal(names, []string{movedCluster}) {
			t.Errorf("the endpoint push generated EDS %v for the gRPC client, want only %s", names, movedCluster)
		}
	}
	// grpc-go kept kept's endpoints: a response leaving a resource out does
	// not delete it for EDS.
	if got := proxylesstest.Tally(ctx, c, 5); got["k1"] != 5 {
		t.Errorf("after the partial EDS response front answered by %v, want k1 5 times", got)
	}
	// And ACKed the partial response: a new nonce, acknowledged, at the
	// new version.
	e.waitStatus(t, proxy, "EDS", xds.StatusSynced)
	after := grpcStatus(t, e, proxy)
	if after.Sent == before.Sent || after.Acked != after.Sent || after.Version == before.Version {
		t.Errorf("EDS after the change: sent %s acked %s version %s; before: sent %s version %s", after.Sent, after.Acked, after.Version, before.Sent, before.Version)
	}
	if after.Resources != 2 {
		t.Errorf("the gRPC client subscribes to %d load assignments after the change, want still 2", after.Resources)
	}
}

// grpcStatus returns the EDS sync state of proxy id.
func grpcStatus(t *testing.T, e *env, id string) xds.TypeStatus {
	t.Helper()
	var ts xds.TypeStatus
	polltest.Within(t, time.Second, "proxy "+id+" connected", func() bool {
		for _, ps := range e.srv.Status() {
			if ps.Proxy == id {
				ts = ps.Types["EDS"]
				return true
			}
		}
		return false
	})
	return ts
}
