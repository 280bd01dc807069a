package xds_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// TestDebugAuthOff serves syncz on the plaintext port, as Istio's istiod
// with ENABLE_DEBUG_ENDPOINT_AUTH=false.
func TestDebugAuthOff(t *testing.T) {
	e := newEnvWith(t, xds.Options{DebugAuthOff: true})
	c := e.sotw(t, productpage, nil)
	must(t, c.Subscribe(gen.ClusterType, nil, wait))
	e.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	r, err := ask(t, e.addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, istioctlNode("istio-system", "default"), xds.DebugSyncz)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := syncz(t, r); got[podID(productpage)]["CDS"] != "SYNCED" {
		t.Fatalf("syncz: %v", got)
	}
}
