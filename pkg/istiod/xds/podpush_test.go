package xds_test

import (
	"context"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestPodChangePushesItsProxyOnly: a pod that appears is no full push.
// The proxy at its address that sends no labels takes the pod's labels, so
// its whole configuration is generated again (and sent where it differs);
// for a proxy that sends its own labels nothing is.
func TestPodChangePushesItsProxyOnly(t *testing.T) {
	var mu sync.Mutex
	generated := map[string]int{}
	e := newEnvWith(t, xds.Options{Generate: func(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*gen.Resource, error) {
		mu.Lock()
		generated[p.PodName+" "+gen.ShortName(typeURL)]++
		mu.Unlock()
		return gen.Generate(pc, p, typeURL, names)
	}})
	count := func(k string) int {
		mu.Lock()
		defer mu.Unlock()
		return generated[k]
	}
	dial := func(id string, labels map[string]any) *xdstest.SotW {
		meta := map[string]any{}
		if labels != nil {
			meta["LABELS"] = labels
		}
		s, err := structpb.NewStruct(meta)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c, err := xdstest.DialSotW(ctx, e.addr, &corev3.Node{Id: id, Metadata: s})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); c.Close() })
		return c
	}
	bare := dial("sidecar~10.9.0.1~bare.default~default.svc.cluster.local", nil)
	labelled := dial("sidecar~10.9.0.2~labelled.default~default.svc.cluster.local", map[string]any{"app": "labelled"})
	for _, c := range []*xdstest.SotW{bare, labelled} {
		must(t, c.Request(gen.ClusterType, nil, "", "", nil))
		must(t, c.Ack(recv(t, c), nil))
	}
	bareBefore, labelledBefore := count("bare CDS"), count("labelled CDS")
	change := e.push(t, e.with(t, `apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: default, labels: {app: bare}}
status: {podIP: 10.9.0.1}`))
	if change.Full || len(change.Hosts) != 0 || len(change.Proxies) != 1 {
		t.Fatalf("change: %+v, want the pod's address alone", change)
	}
	polltest.Within(t, wait, "the clusters of the proxy at the new pod's address generated again", func() bool {
		return count("bare CDS") > bareBefore
	})
	expectNone(t, labelled)
	if n := count("labelled CDS"); n != labelledBefore {
		t.Errorf("the proxy with labels of its own had its clusters generated %d times more", n-labelledBefore)
	}
}
