package xds_test

import (
	"fmt"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// sidecarEDS wraps gen.Generate and counts the sidecars' EDS generations.
type sidecarEDS struct {
	mu sync.Mutex
	n  int
}

func (s *sidecarEDS) generate(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*gen.Resource, error) {
	if typeURL == gen.EndpointType && !p.IsGRPC() {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return gen.Generate(pc, p, typeURL, names)
}

func (s *sidecarEDS) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// TestFullPushSharesEDS: in a full push, the sidecars of one scope that
// subscribe to the same load assignments have them generated once; a
// sidecar of another scope has its own.
func TestFullPushSharesEDS(t *testing.T) {
	rec := &sidecarEDS{}
	done := make(chan bool, 10)
	e := newEnvWith(t, xds.Options{Generate: rec.generate, PushDone: func(full bool) { done <- full }})
	<-done // the first push, before any connection
	// Eight names, as a sidecar of a mesh subscribes to many: the server
	// shares lists of eight or more between its connections.
	names := []string{"outbound|9080||reviews.default.svc.cluster.local"}
	for i := range 7 {
		names = append(names, fmt.Sprintf("outbound|80||absent-%d.default.svc.cluster.local", i))
	}
	var clients []*xdstest.Delta
	for _, id := range []string{productpage, ratingsProxy, cartProxy} { // default, default, shop
		c := e.delta(t, id)
		must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResourceNamesSubscribe: names}))
		must(t, c.Ack(drecv(t, c)))
		clients = append(clients, c)
	}
	before := rec.count()
	e.repush()
	if full := <-done; !full {
		t.Fatal("the push was not full")
	}
	if n := rec.count() - before; n != 2 {
		t.Errorf("EDS generated %d times for three sidecars in two scopes, want 2", n)
	}
	for _, c := range clients {
		if r := ddrain(t, c)[gen.EndpointType]; r != nil {
			t.Errorf("unchanged load assignments sent again: %v", dnames(r))
		}
	}
}
