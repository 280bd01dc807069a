package xds_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// vsSplit is the reviews VirtualService with a given v1 weight.
func vsSplit(v1 string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: ` + v1 + `
    - destination: {host: reviews, subset: v2}
      weight: ` + map[string]string{"90": "10", "50": "50", "20": "80"}[v1] + "\n"
}

const reviewsSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: reviews-abc12, namespace: default, labels: {kubernetes.io/service-name: reviews}}
addressType: IPv4
ports: [{name: grpc, port: 9080}]
endpoints:
- {addresses: ["127.0.0.11"], targetRef: {kind: Pod, name: reviews-v1-0}}
- {addresses: ["127.0.0.12"], targetRef: {kind: Pod, name: reviews-v2-0}}
- {addresses: ["127.0.0.14"], targetRef: {kind: Pod, name: reviews-v1-0}}
`

const detailsService = `apiVersion: v1
kind: Service
metadata: {name: details, namespace: default}
spec:
  clusterIP: 10.96.0.14
  ports: [{name: http, port: 9080}, {name: tcp-db, port: 3307}]
`

func TestSotWAckNackNonce(t *testing.T) {
	e := newEnv(t)
	c := e.sotw(t, productpage, nil)

	// Nothing sent yet.
	must(t, c.Request(gen.ClusterType, nil, "", "", nil))
	cds := recv(t, c)
	if len(cds.GetResources()) == 0 || cds.GetNonce() == "" {
		t.Fatalf("CDS response: %d resources, nonce %q", len(cds.GetResources()), cds.GetNonce())
	}
	if got := e.status(productpage, "LDS"); got != xds.StatusNotSent {
		t.Errorf("LDS before any request: %s, want NOT SENT", got)
	}
	e.waitStatus(t, productpage, "CDS", xds.StatusStale) // sent, not acked
	must(t, c.Ack(cds, nil))
	expectNone(t, c) // an ACK gets no response
	e.waitStatus(t, productpage, "CDS", xds.StatusSynced)

	eds, rds := []string{}, []string{}
	t.Run("subscribe", func(t *testing.T) {
		eds = edsNames(t, cds)
		must(t, c.Request(gen.EndpointType, eds, "", "", nil))
		r := recv(t, c)
		if got := names(t, r); !slices.Equal(got, eds) {
			t.Fatalf("EDS names %v, want %v", got, eds)
		}
		must(t, c.Ack(r, eds))
		must(t, c.Request(gen.ListenerType, nil, "", "", nil))
		lds := recv(t, c)
		must(t, c.Ack(lds, nil))
		rds = refsOf(t, lds).routes()
		must(t, c.Request(gen.RouteType, rds, "", "", nil))
		r = recv(t, c)
		if got := names(t, r); !slices.Equal(got, rds) {
			t.Fatalf("RDS names %v, want %v", got, rds)
		}
		must(t, c.Ack(r, rds))
		for _, typ := range []string{"CDS", "EDS", "LDS", "RDS"} {
			e.waitStatus(t, productpage, typ, xds.StatusSynced)
		}
	})

	t.Run("NACK is recorded and not resent", func(t *testing.T) {
		e.push(t, e.with(t, vsSplit("50")))
		r := recv(t, c)
		if r.GetTypeUrl() != gen.RouteType {
			t.Fatalf("a VirtualService change pushed %s first, want only RDS", gen.ShortName(r.GetTypeUrl()))
		}
		must(t, c.Nack(r, rds, errors.New("route rejected")))
		e.waitStatus(t, productpage, "RDS", xds.StatusError)
		expectNone(t, c)
		// A full push with the same config: the rejected RDS is not resent.
		e.srv.Push(e.srv.PushContext(), fullChange())
		expectNone(t, c)
		if got := e.status(productpage, "RDS"); got != xds.StatusError {
			t.Fatalf("RDS after resend attempt: %s, want ERROR", got)
		}
		// A new config is sent, and its ACK clears the error.
		e.push(t, e.with(t, vsSplit("20")))
		r = recv(t, c)
		if r.GetTypeUrl() != gen.RouteType {
			t.Fatalf("got %s, want RDS", gen.ShortName(r.GetTypeUrl()))
		}
		must(t, c.Ack(r, rds))
		e.waitStatus(t, productpage, "RDS", xds.StatusSynced)
	})

	t.Run("stale nonce is ignored", func(t *testing.T) {
		// An old nonce with different names: no response, state unchanged.
		must(t, c.Request(gen.EndpointType, eds[:1], "", cds.GetNonce(), nil))
		expectNone(t, c)
		e.waitStatus(t, productpage, "EDS", xds.StatusSynced)
	})

	t.Run("endpoint-only change pushes EDS only", func(t *testing.T) {
		e.push(t, e.with(t, reviewsSlice))
		r := recv(t, c)
		if r.GetTypeUrl() != gen.EndpointType {
			t.Fatalf("got %s, want EDS", gen.ShortName(r.GetTypeUrl()))
		}
		got := names(t, r)
		for _, n := range got {
			if gen.EndpointHosts(n) != "reviews.default.svc.cluster.local" {
				t.Errorf("EDS push carried %s, which did not change", n)
			}
		}
		// The new endpoint is a v1 pod: the default and v1 clusters changed,
		// v2 did not and is not resent.
		if want := []string{"outbound|9080|v1|reviews.default.svc.cluster.local", "outbound|9080||reviews.default.svc.cluster.local"}; !slices.Equal(got, want) {
			t.Errorf("EDS push: %v, want %v", got, want)
		}
		must(t, c.Ack(r, eds))
		expectNone(t, c)
	})

	t.Run("full push in order CDS, EDS, LDS, RDS", func(t *testing.T) {
		in := e.with(t, detailsService)
		e.in = in
		in = e.with(t, reviewsSlice2)
		e.push(t, in)
		var order []string
		for range 4 {
			r := recv(t, c)
			order = append(order, gen.ShortName(r.GetTypeUrl()))
			switch r.GetTypeUrl() {
			case gen.ClusterType, gen.ListenerType:
				must(t, c.Ack(r, nil))
			case gen.EndpointType:
				must(t, c.Ack(r, eds))
			case gen.RouteType:
				must(t, c.Ack(r, rds))
			}
		}
		if want := []string{"CDS", "EDS", "LDS", "RDS"}; !slices.Equal(order, want) {
			t.Fatalf("push order %v, want %v", order, want)
		}
		expectNone(t, c)
	})

	t.Run("empty names unsubscribe EDS", func(t *testing.T) {
		must(t, c.Request(gen.EndpointType, nil, "", lastNonce(t, e, "EDS"), nil))
		expectNone(t, c)
		e.push(t, e.with(t, reviewsSlice))
		expectNone(t, c)
	})
}

// reviewsSlice2 moves one reviews endpoint, so a full push also changes EDS.
var reviewsSlice2 = reviewsSlice[:len(reviewsSlice)-len("- {addresses: [\"127.0.0.14\"], targetRef: {kind: Pod, name: reviews-v1-0}}\n")] +
	"- {addresses: [\"127.0.0.15\"], targetRef: {kind: Pod, name: reviews-v1-0}}\n"

func lastNonce(t *testing.T, e *env, typ string) string {
	t.Helper()
	for _, ps := range e.srv.Status() {
		if ps.Proxy == productpage {
			return ps.Types[typ].Sent
		}
	}
	t.Fatal("proxy not connected")
	return ""
}
