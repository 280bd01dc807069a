package xds_test

import (
	"errors"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

func drecv(t *testing.T, c *xdstest.Delta) *discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	r, err := c.Recv(wait)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return r
}

func dnone(t *testing.T, c *xdstest.Delta) {
	t.Helper()
	if r, err := c.Recv(quiet); err == nil {
		t.Fatalf("unexpected %s response: %d resources, removed %v", gen.ShortName(r.GetTypeUrl()), len(r.GetResources()), r.GetRemovedResources())
	}
}

func dnames(r *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	slices.Sort(out)
	return out
}

func TestDelta(t *testing.T) {
	e := newEnv(t)
	c := e.delta(t, productpage)

	must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.ClusterType}))
	cds := drecv(t, c)
	if len(cds.GetResources()) == 0 {
		t.Fatal("wildcard CDS: no clusters")
	}
	for _, r := range cds.GetResources() {
		if r.GetVersion() == "" {
			t.Errorf("cluster %s has no version", r.GetName())
		}
		if _, err := xdstest.Validate(r.GetResource(), nil); err != nil {
			t.Error(err)
		}
	}
	e.waitStatus(t, productpage, "CDS", xds.StatusStale)
	must(t, c.Ack(cds))
	dnone(t, c)
	e.waitStatus(t, productpage, "CDS", xds.StatusSynced)

	reviews := []string{
		"outbound|9080|v1|reviews.default.svc.cluster.local",
		"outbound|9080|v2|reviews.default.svc.cluster.local",
		"outbound|9080||reviews.default.svc.cluster.local",
	}
	ratings := "outbound|9080||ratings.default.svc.cluster.local"
	must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResourceNamesSubscribe: append(slices.Clone(reviews), ratings)}))
	eds := drecv(t, c)
	if got, want := dnames(eds), append(slices.Clone(reviews), ratings); !slices.Equal(got, sorted(want)) {
		t.Fatalf("EDS %v, want %v", got, sorted(want))
	}
	must(t, c.Ack(eds))
	dnone(t, c)

	t.Run("endpoint change sends only changed resources", func(t *testing.T) {
		e.push(t, e.with(t, reviewsSlice))
		r := drecv(t, c)
		if r.GetTypeUrl() != gen.EndpointType {
			t.Fatalf("got %s, want EDS", gen.ShortName(r.GetTypeUrl()))
		}
		// v2 has the same endpoints as before: only default and v1 changed.
		if got, want := dnames(r), sorted([]string{reviews[0], reviews[2]}); !slices.Equal(got, want) {
			t.Fatalf("EDS %v, want %v", got, want)
		}
		must(t, c.Ack(r))
		dnone(t, c)
	})

	t.Run("NACK is recorded and not resent", func(t *testing.T) {
		e.push(t, e.with(t, detailsService))
		r := drecv(t, c)
		if r.GetTypeUrl() != gen.ClusterType || !slices.Equal(dnames(r), detailsClusters) {
			t.Fatalf("got %s %v, want CDS with the new cluster only", gen.ShortName(r.GetTypeUrl()), dnames(r))
		}
		must(t, c.Nack(r, errors.New("cluster rejected")))
		e.waitStatus(t, productpage, "CDS", xds.StatusError)
		e.srv.Push(e.srv.PushContext(), model.Change{Full: true})
		dnone(t, c)
	})

	t.Run("removal", func(t *testing.T) {
		in := *e.in
		in.Services = slices.DeleteFunc(slices.Clone(in.Services), func(s *corev1.Service) bool { return s.Name == "details" })
		e.push(t, &in)
		r := drecv(t, c)
		if r.GetTypeUrl() != gen.ClusterType || !slices.Equal(r.GetRemovedResources(), detailsClusters) {
			t.Fatalf("got %s removed %v, want the details cluster removed", gen.ShortName(r.GetTypeUrl()), r.GetRemovedResources())
		}
		must(t, c.Ack(r))
		e.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	})

	t.Run("stale nonce ignored, unsubscribe applied", func(t *testing.T) {
		must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResponseNonce: "stale",
			ResourceNamesUnsubscribe: []string{ratings}}))
		dnone(t, c)
		e.waitStatus(t, productpage, "EDS", xds.StatusSynced)
		for _, ps := range e.srv.Status() {
			if got := ps.Types["EDS"].Resources; got != 3 {
				t.Fatalf("EDS subscribed to %d names after unsubscribe, want 3", got)
			}
		}
	})

	t.Run("initial versions: only what differs is sent", func(t *testing.T) {
		c2 := e.delta(t, productpage)
		versions := map[string]string{}
		for _, r := range eds.GetResources() {
			versions[r.GetName()] = r.GetVersion()
		}
		must(t, c2.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.EndpointType, ResourceNamesSubscribe: []string{ratings},
			InitialResourceVersions: map[string]string{ratings: versions[ratings]}}))
		r := drecv(t, c2)
		if len(r.GetResources()) != 0 {
			t.Fatalf("client already had %s at its version, got it again", ratings)
		}
	})
}

var detailsClusters = []string{"outbound|3307||details.default.svc.cluster.local", "outbound|9080||details.default.svc.cluster.local"}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
