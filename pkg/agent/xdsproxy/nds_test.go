package xdsproxy_test

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestClustersBeforeTheFirstNameTable: with NoEnvoy, the
// agent's own stream asks for clusters first, so istiod's service ports
// reach the DNS proxy before the first NameTable and its answers are built
// once at start-up, not twice.
func TestClustersBeforeTheFirstNameTable(t *testing.T) {
	addr := freeAddr(t)
	stop := startIstiod(t, addr)
	defer stop()

	events := make(chan string, 16)
	p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), NoEnvoy: true,
		OnNameTable: func(*nds.NameTable) { events <- "name table" },
		OnClusters: func(names []string) {
			if len(names) > 0 {
				events <- "clusters"
			}
		}}, slog.New(slog.DiscardHandler))
	serve(t, p)
	var got []string
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(15 * time.Second):
			t.Fatalf("after 15 s only %q", got)
		}
	}
	if got[0] != "clusters" || got[1] != "name table" {
		t.Errorf("first pushes %q, want clusters then the name table", got)
	}
}

// TestClustersFromTheProxysStream: without NoEnvoy the agent's own
// stream asks for the NameTable alone, and the cluster names come from the
// CDS response carried to the proxy, so istiod sends the clusters once.
func TestClustersFromTheProxysStream(t *testing.T) {
	addr := freeAddr(t)
	stop := startIstiod(t, addr)
	defer stop()

	got := make(chan []string, 16)
	p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), OwnStreamAfter: time.Millisecond,
		OnNameTable: func(*nds.NameTable) {},
		OnClusters:  func(names []string) { got <- names }}, slog.New(slog.DiscardHandler))
	sock, ctx := serve(t, p)
	polltest.Until(t, "the NameTable from istiod", p.TableLoaded)
	select {
	case names := <-got:
		t.Fatalf("cluster names %v before any proxy asked for clusters: the agent asked itself", names)
	default:
	}

	_, resp := clusters(t, ctx, dial(t, "unix://"+sock))
	var want []string
	for _, r := range resp.GetResources() {
		var c clusterv3.Cluster
		if err := r.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c.GetName())
	}
	slices.Sort(want)
	select {
	case names := <-got:
		if !slices.Equal(names, want) || len(names) == 0 {
			t.Errorf("cluster names %v, want the %d of the proxy's CDS response %v", names, len(want), want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no cluster names 15 s after the proxy's CDS response")
	}
}
