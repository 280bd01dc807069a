package model_test

import (
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

func sample(t *testing.T) *model.Inputs {
	t.Helper()
	r := file.New(filepath.Join("..", "..", "..", "examples", "mesh"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	return r.Inputs()
}

// TestRebuild checks that a rebuild after an endpoint change equals a
// build from scratch, reports only that service, and reuses the rest.
func TestRebuild(t *testing.T) {
	in := sample(t)
	prev := model.BuildPushContext(in, "1")

	next := movedRatings(t, in)
	re := model.Rebuild(prev, next, "2")
	scratch := model.BuildPushContext(next, "2")
	if !reflect.DeepEqual(re.Endpoints, scratch.Endpoints) || !reflect.DeepEqual(re.EndpointHash, scratch.EndpointHash) || re.ConfigHash != scratch.ConfigHash {
		t.Fatal("rebuild differs from a build from scratch")
	}
	c := re.Diff(prev)
	if _, ok := c.Hosts["ratings.default.svc.cluster.local"]; c.Full || len(c.Hosts) != 1 || !ok {
		t.Fatalf("change %+v, want ratings' endpoints only", c)
	}
	if &re.Services[0] != &prev.Services[0] {
		t.Error("services were rebuilt, want them reused")
	}
	if eps := re.Endpoints["reviews.default.svc.cluster.local"]; &eps[0] != &prev.Endpoints["reviews.default.svc.cluster.local"][0] {
		t.Error("unchanged endpoints were rebuilt, want them reused")
	}

	// A configuration change rebuilds everything.
	cfg := *next
	cfg.VirtualServices = slices.Clone(in.VirtualServices[:1])
	if c := model.Rebuild(re, &cfg, "3").Diff(re); !c.Full {
		t.Fatalf("dropping a VirtualService: %+v, want a full change", c)
	}
}

// TestServiceAccountChangeIsFull: a WorkloadEntry that changes only its
// service account changes the SANs its service's clients check (CDS), so
// the change is full, not endpoints only; a change of address is not.
func TestServiceAccountChangeIsFull(t *testing.T) {
	in := sample(t)
	prev := model.BuildPushContext(in, "1")
	edit := func(f func(we *networking.WorkloadEntry)) *model.Inputs {
		next := *in
		next.WorkloadEntries = slices.Clone(in.WorkloadEntries)
		for i, we := range next.WorkloadEntries {
			if we.Name == "ratings-vm" {
				c := we.DeepCopy()
				f(c)
				next.WorkloadEntries[i] = c
				return &next
			}
		}
		t.Fatal("no ratings-vm WorkloadEntry")
		return nil
	}
	moved := model.Rebuild(prev, edit(func(we *networking.WorkloadEntry) { we.Spec.Address = "127.0.0.24" }), "2")
	if c := moved.Diff(prev); c.Full || len(c.Hosts) != 1 {
		t.Errorf("a new address: change %+v, want ratings' endpoints only", c)
	}
	renamed := model.Rebuild(prev, edit(func(we *networking.WorkloadEntry) { we.Spec.ServiceAccount = "ratings-v2" }), "3")
	if c := renamed.Diff(prev); !c.Full {
		t.Errorf("a new service account: change %+v, want full", c)
	}
}
