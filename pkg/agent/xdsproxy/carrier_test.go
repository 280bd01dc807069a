package xdsproxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// envoyStream stands in for Envoy's ADS stream to the agent's socket: it
// asks for clusters, ACKs every response, and records the types it got.
type envoyStream struct {
	mu    sync.Mutex
	types []string
	done  chan error
}

func (e *envoyStream) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.types)
}

func (e *envoyStream) saw(typeURL string) {
	e.mu.Lock()
	e.types = append(e.types, typeURL)
	e.mu.Unlock()
}

// startEnvoy opens a SotW or delta stream to the socket until ctx ends.
func startEnvoy(t *testing.T, ctx context.Context, sock string, delta bool) *envoyStream {
	t.Helper()
	e := &envoyStream{done: make(chan error, 1)}
	types := []string{clusterType}
	var run func() error
	if delta {
		c, err := xdstest.DialDelta(ctx, "unix://"+sock, node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		run = func() error { return c.AckAll(types, e.saw) }
	} else {
		c, err := xdstest.DialSotW(ctx, "unix://"+sock, node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		run = func() error { return c.AckAll(types, e.saw) }
	}
	go func() { e.done <- run() }()
	return e
}

// streams describes istiod's streams for the test's node: the types each
// watches, sorted.
func streams(d *istiod.Istiod) []string {
	var out []string
	for _, c := range d.XDS().Connections() {
		if c.Proxy().ID == node.GetId() {
			out = append(out, fmt.Sprint(c.Watched()))
		}
	}
	slices.Sort(out)
	return out
}

var (
	ownStream   = fmt.Sprint([]string{xdsproxy.NameTableType})
	envoysOwn   = fmt.Sprint([]string{clusterType})
	envoyWithNT = fmt.Sprint([]string{clusterType, xdsproxy.NameTableType})
)

// TestNameTableRidesEnvoysStream: as Istio's agent, the agent asks for the
// NameTable on Envoy's stream, SotW or delta, and keeps the answers (and
// their ACKs) to itself; istiod sees one stream for the pod.
func TestNameTableRidesEnvoysStream(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			addr := freeAddr(t)
			d, stop := runIstiod(t, addr)
			defer stop()
			tables := make(chan *nds.NameTable, 16)
			p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), OwnStreamAfter: time.Hour,
				OnNameTable: func(nt *nds.NameTable) { tables <- nt }}, slog.New(slog.DiscardHandler))
			sock, ctx := serve(t, p)

			e := startEnvoy(t, ctx, sock, delta)
			select {
			case nt := <-tables:
				if _, ok := nt.GetTable()["reviews.default.svc.cluster.local"]; !ok {
					t.Errorf("NameTable lacks reviews: %v", nt.GetTable())
				}
			case err := <-e.done:
				t.Fatalf("Envoy's stream ended: %v", err)
			case <-time.After(15 * time.Second):
				t.Fatal("no NameTable 15 s after Envoy connected")
			}
			polltest.Until(t, "one stream on istiod, with the clusters and the NameTable", func() bool {
				return slices.Equal(streams(d), []string{envoyWithNT})
			})
			polltest.Until(t, "Envoy's clusters", func() bool { return slices.Contains(e.got(), clusterType) })
			if slices.Contains(e.got(), xdsproxy.NameTableType) {
				t.Errorf("Envoy was sent the NameTable: %v", e.got())
			}
		})
	}
}

// TestOwnStreamOnlyWithoutEnvoy: with no Envoy connected the agent opens a
// stream of its own for the NameTable; it closes it once Envoy's stream
// delivers the table, and opens it again when Envoy's stream ends.
func TestOwnStreamOnlyWithoutEnvoy(t *testing.T) {
	addr := freeAddr(t)
	d, stop := runIstiod(t, addr)
	defer stop()
	var mu sync.Mutex
	n := 0
	count := func() int { mu.Lock(); defer mu.Unlock(); return n }
	p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), OwnStreamAfter: 10 * time.Millisecond,
		OnNameTable: func(*nds.NameTable) { mu.Lock(); n++; mu.Unlock() }}, slog.New(slog.DiscardHandler))
	sock, ctx := serve(t, p)

	polltest.Until(t, "the NameTable on the agent's own stream", func() bool {
		return p.TableLoaded() && slices.Equal(streams(d), []string{ownStream})
	})
	before := count()
	ectx, ecancel := context.WithCancel(ctx)
	startEnvoy(t, ectx, sock, false)
	polltest.Until(t, "the own stream closed, the table on Envoy's", func() bool {
		return slices.Equal(streams(d), []string{envoyWithNT}) && count() > before
	})
	ecancel()
	polltest.Until(t, "the own stream back once Envoy's ended", func() bool {
		return slices.Equal(streams(d), []string{ownStream})
	})
}

// TestNoEnvoyKeepsItsOwnStream: with NoEnvoy (proxyless gRPC) the app's
// stream never carries the NameTable: the agent's own stream does.
func TestNoEnvoyKeepsItsOwnStream(t *testing.T) {
	addr := freeAddr(t)
	d, stop := runIstiod(t, addr)
	defer stop()
	p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), NoEnvoy: true,
		OnNameTable: func(*nds.NameTable) {}}, slog.New(slog.DiscardHandler))
	sock, ctx := serve(t, p)
	polltest.Until(t, "the NameTable", p.TableLoaded)
	e := startEnvoy(t, ctx, sock, false)
	polltest.Until(t, "the app's stream and the agent's", func() bool {
		return slices.Equal(streams(d), []string{envoysOwn, ownStream}) && slices.Contains(e.got(), clusterType)
	})
}
