package model_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

const (
	ratingsHost = "ratings.default.svc.cluster.local"
	reviewsHost = "reviews.default.svc.cluster.local"
)

// Memos of the tests: byName reads configuration only; byHost the
// endpoints of the host it is keyed by; anyHost every service's endpoints.
var (
	byName = model.NewMemo[string, []string]()
	byHost = model.NewHostMemo[string, int](func(host string) string { return host })
	// bySvc is byHost declared the general way.
	bySvc   = model.NewEndpointMemo[string, int](func(host string, svc *model.Service) bool { return host == svc.Hostname })
	anyHost = model.NewEndpointMemo[string, int](func(string, *model.Service) bool { return true })
)

// movedRatings returns in with one ratings endpoint added: an
// endpoint-only change.
func movedRatings(t *testing.T, in *model.Inputs) *model.Inputs {
	t.Helper()
	next := *in
	next.EndpointSlices = slices.Clone(in.EndpointSlices)
	for i, sl := range next.EndpointSlices {
		if sl.Name == "ratings-x1" {
			c := sl.DeepCopy()
			c.Endpoints = append(c.Endpoints, discoveryv1.Endpoint{Addresses: []string{"127.0.0.23"}})
			next.EndpointSlices[i] = c
			return &next
		}
	}
	t.Fatal("no ratings-x1 slice")
	return nil
}

func TestMemoBuildsOnce(t *testing.T) {
	pc := model.BuildPushContext(sample(t), "1")
	var builds atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := byName.Get(pc, "once", func() []string { builds.Add(1); return []string{"v"} })
			if !slices.Equal(got, []string{"v"}) {
				t.Errorf("Get = %v", got)
			}
		}()
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want once", n)
	}
	if got := byName.Get(model.BuildPushContext(sample(t), "2"), "once", func() []string { return nil }); got != nil {
		t.Fatalf("another push context shares the value %v", got)
	}
}

// TestInherit checks an endpoint-only change keeps exactly the values
// whose memo says they read none of the changed endpoints, and a
// configuration change keeps nothing.
func TestInherit(t *testing.T) {
	in := sample(t)
	prev := model.BuildPushContext(in, "1")
	built := map[string]int{}
	get := func(pc *model.PushContext) {
		byName.Get(pc, "x", func() []string { built["config"]++; return nil })
		for _, h := range []string{ratingsHost, reviewsHost} {
			byHost.Get(pc, h, func() int { built[h]++; return 0 })
			bySvc.Get(pc, h, func() int { built["svc "+h]++; return 0 })
		}
		anyHost.Get(pc, "x", func() int { built["any"]++; return 0 })
	}
	get(prev)

	pc := model.Rebuild(prev, movedRatings(t, in), "2")
	pc.Inherit(prev, pc.Diff(prev))
	get(pc)
	want := map[string]int{"config": 1, reviewsHost: 1, ratingsHost: 2, "svc " + reviewsHost: 1, "svc " + ratingsHost: 2, "any": 2}
	if !equalCounts(built, want) {
		t.Fatalf("builds after an endpoint change %v, want %v", built, want)
	}

	cfg := *in
	cfg.VirtualServices = slices.Clone(in.VirtualServices[:1])
	full := model.Rebuild(pc, &cfg, "3")
	full.Inherit(pc, full.Diff(pc))
	get(full)
	want = map[string]int{"config": 2, reviewsHost: 2, ratingsHost: 3, "svc " + reviewsHost: 2, "svc " + ratingsHost: 3, "any": 3}
	if !equalCounts(built, want) {
		t.Fatalf("builds after a configuration change %v, want %v", built, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// BenchmarkMemoGet is the push hot path: a cached value asked for again.
func BenchmarkMemoGet(b *testing.B) {
	in := &model.Inputs{}
	pc := model.BuildPushContext(in, "1")
	byHost.Get(pc, ratingsHost, func() int { return 1 })
	b.ReportAllocs()
	for b.Loop() {
		byHost.Get(pc, ratingsHost, func() int { return 2 })
	}
}
