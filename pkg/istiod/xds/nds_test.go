package xds_test

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// dbIPs returns the addresses of the headless db service in a name table.
func dbIPs(t *testing.T, a *anypb.Any) []string {
	t.Helper()
	m, err := xdstest.Validate(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*nds.NameTable).GetTable()["db.default.svc.cluster.local"].GetIps()
}

// TestNameTableFollowsHeadlessEndpoints moves the endpoint of a headless
// service, an endpoint-only change: proxies holding the name table get the
// new one, and nothing else they hold is pushed.
func TestNameTableFollowsHeadlessEndpoints(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := newEnv(t)
		e.in = e.with(t, xdstest.HeadlessDB)
		e.push(t, e.with(t, xdstest.DBSlice("127.0.0.61")))
		c := e.sotw(t, productpage, nil)
		for _, typ := range []string{gen.ClusterType, gen.NameTableType} {
			must(t, c.Request(typ, nil, "", "", nil))
			r := recv(t, c)
			if typ == gen.NameTableType {
				if got := dbIPs(t, r.GetResources()[0]); !slices.Equal(got, []string{"127.0.0.61"}) {
					t.Fatalf("db in the first name table: %v", got)
				}
			}
			must(t, c.Ack(r, nil))
		}
		if ch := e.push(t, e.with(t, xdstest.DBSlice("127.0.0.62"))); ch.Full {
			t.Fatal("moving an endpoint was a full change")
		}
		r := recv(t, c)
		if r.GetTypeUrl() != gen.NameTableType {
			t.Fatalf("got %s, want NDS", gen.ShortName(r.GetTypeUrl()))
		}
		if got := dbIPs(t, r.GetResources()[0]); !slices.Equal(got, []string{"127.0.0.62"}) {
			t.Fatalf("db in the pushed name table: %v, want [127.0.0.62]", got)
		}
		must(t, c.Ack(r, nil))
		expectNone(t, c)
	})
	t.Run("delta", func(t *testing.T) {
		e := newEnv(t)
		e.in = e.with(t, xdstest.HeadlessDB)
		e.push(t, e.with(t, xdstest.DBSlice("127.0.0.61")))
		c := e.delta(t, productpage)
		for _, typ := range []string{gen.ClusterType, gen.NameTableType} {
			must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ}))
			must(t, c.Ack(drecv(t, c)))
		}
		e.push(t, e.with(t, xdstest.DBSlice("127.0.0.62")))
		r := drecv(t, c)
		if r.GetTypeUrl() != gen.NameTableType || len(r.GetResources()) != 1 {
			t.Fatalf("got %s with %d resources, want one NDS", gen.ShortName(r.GetTypeUrl()), len(r.GetResources()))
		}
		if got := dbIPs(t, r.GetResources()[0].GetResource()); !slices.Equal(got, []string{"127.0.0.62"}) {
			t.Fatalf("db in the pushed name table: %v, want [127.0.0.62]", got)
		}
		must(t, c.Ack(r))
		dnone(t, c)
	})
}
