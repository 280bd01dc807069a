package xds_test

import (
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
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
