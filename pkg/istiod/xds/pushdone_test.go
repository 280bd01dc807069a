package xds_test

import (
	"strconv"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// TestPushDone checks the hook runs once a push reached every connection,
// and at once when there is none.
func TestPushDone(t *testing.T) {
	done := make(chan bool, 10)
	e := newEnvWith(t, xds.Options{PushDone: func(full bool) { done <- full }})
	if full := <-done; !full {
		t.Fatal("the first push (no connection yet) reported an endpoint-only push")
	}
	c := e.sotw(t, productpage, nil)
	subscribeAll(t, c)
	e.push(t, e.with(t, reviewsSlice)) // endpoint-only: EDS to the sidecar
	recv(t, c)
	if full := <-done; full {
		t.Fatal("an endpoint-only push reported as full")
	}
}

// TestPushesWhileAcking pushes a burst of changes while the sidecar ACKs
// each response as it comes: pushes merge, none is lost, and the last
// version ends synced (pushes run beside the stream's request handling).
func TestPushesWhileAcking(t *testing.T) {
	e := newEnv(t)
	c := e.sotw(t, productpage, nil)
	_, rds := subscribeAll(t, c)
	var last, got string
	for i := range 30 {
		// Each push a new route timeout: every version differs for RDS.
		e.push(t, e.with(t, vsSplit("50")+"    timeout: "+strconv.Itoa(i+1)+"s\n"))
		last = e.srv.PushContext().Version
		// ACK whatever arrived so far, without waiting for it.
		for {
			r, err := c.Recv(0)
			if err != nil {
				break
			}
			must(t, c.Ack(r, rds))
			got = r.GetVersionInfo()
		}
	}
	for got != last {
		r := recv(t, c)
		must(t, c.Ack(r, rds))
		got = r.GetVersionInfo()
	}
	e.waitStatus(t, productpage, "RDS", xds.StatusSynced)
	if got := grpcStatusOf(t, e, productpage, "RDS").Version; got != last {
		t.Fatalf("RDS synced at %s, want the last version %s", got, last)
	}
}

// grpcStatusOf returns the sync state of type typ for proxy id.
func grpcStatusOf(t *testing.T, e *env, id, typ string) xds.TypeStatus {
	t.Helper()
	for _, ps := range e.srv.Status() {
		if ps.Proxy == id {
			return ps.Types[typ]
		}
	}
	t.Fatalf("proxy %s not connected", id)
	return xds.TypeStatus{}
}

// TestSynced checks the hook runs once per type a stream answers for the
// first time, on both protocols, and not for ACKs or later subscription
// changes.
func TestSynced(t *testing.T) {
	synced := make(chan struct{}, 20)
	e := newEnvWith(t, xds.Options{Synced: func() { synced <- struct{}{} }})
	c := e.sotw(t, productpage, nil)
	subscribeAll(t, c) // four first answers: CDS, EDS, LDS, RDS
	// Another sidecar, on a delta stream.
	const details = "sidecar~10.0.0.9~details-v1-1.default~default.svc.cluster.local"
	d := e.delta(t, details)
	must(t, d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.ClusterType}))
	cds := drecv(t, d)
	must(t, d.Ack(cds))
	must(t, d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResourceNamesSubscribe: []string{"outbound|9080|v1|reviews.default.svc.cluster.local"}}))
	must(t, d.Ack(drecv(t, d)))
	must(t, d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResourceNamesSubscribe: []string{"outbound|9080|v2|reviews.default.svc.cluster.local"}}))
	must(t, d.Ack(drecv(t, d)))
	// A stream runs the hook before it reads the next request: once the
	// last ACKs are in, every hook has run.
	e.waitStatus(t, productpage, "RDS", xds.StatusSynced)
	e.waitStatus(t, details, "EDS", xds.StatusSynced)
	if n := len(synced); n != 6 {
		t.Fatalf("Synced ran %d times, want 6 (four SotW types, two delta)", n)
	}
}
