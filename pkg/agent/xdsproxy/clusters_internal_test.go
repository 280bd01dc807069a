package xdsproxy

import (
	"context"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestSotWNames: the names of a state-of-the-world CDS response are read
// from Envoy's own Cluster encoding, whatever else a cluster holds.
func TestSotWNames(t *testing.T) {
	resp := &discovery.DiscoveryResponse{TypeUrl: ClusterType}
	want := []string{"outbound|80||a.ns.svc.cluster.local", "BlackHoleCluster", "inbound|8080||"}
	for _, n := range want {
		a, err := anypb.New(&cluster.Cluster{
			AltStatName:          "stat-" + n,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			Name:                 n,
		})
		if err != nil {
			t.Fatal(err)
		}
		resp.Resources = append(resp.Resources, a)
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sotwNames(b)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("sotwNames = %v, %v; want %v", got, err, want)
	}
}

// TestDeltaNames: a delta stream's held clusters follow its adds and
// removals.
func TestDeltaNames(t *testing.T) {
	held := map[string]struct{}{}
	for _, step := range []struct {
		add, remove, want []string
	}{
		{add: []string{"a", "b"}, want: []string{"a", "b"}},
		{add: []string{"c"}, want: []string{"a", "b", "c"}},
		{add: []string{"b"}, remove: []string{"a"}, want: []string{"b", "c"}},
		{remove: []string{"b", "c", "gone"}, want: []string{}},
	} {
		resp := &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, RemovedResources: step.remove}
		for _, n := range step.add {
			resp.Resources = append(resp.Resources, &discovery.Resource{Name: n})
		}
		b, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := deltaNames(held, b)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("after +%v -%v: %v, want %v", step.add, step.remove, got, step.want)
		}
	}
}

// TestClusterFeed: unchanged lists are not handed on again, and a reader
// that falls behind gets the newest list, not a backlog.
func TestClusterFeed(t *testing.T) {
	f := newClusterFeed()
	f.seen([]string{"b", "a"})
	f.seen([]string{"a", "b"}) // the same, in another order
	f.seen([]string{"a", "b", "c"})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []string, 4)
	go f.run(ctx, func(names []string) { got <- names; cancel() })
	<-ctx.Done()
	if names := <-got; !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("handed on %v, want only the newest [a b c]", names)
	}
	f.seen([]string{"a", "b", "c"})
	select {
	case <-f.latest:
		t.Error("an unchanged list was queued again")
	default:
	}
}
