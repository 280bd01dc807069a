package xdsproxy_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/grpcsock/grpcsocktest"
	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

var node = &corev3.Node{Id: "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local", Cluster: "productpage.default"}

// startIstiod runs istiod on the sample mesh at addr until stop is called.
func startIstiod(t *testing.T, addr string) (stop func()) {
	t.Helper()
	_, stop = runIstiod(t, addr)
	return stop
}

// runIstiod is startIstiod, returning istiod too.
func runIstiod(t *testing.T, addr string) (*istiod.Istiod, func()) {
	t.Helper()
	cfg := istiod.DefaultConfig()
	cfg.ConfigDir, _ = filepath.Abs("../../../examples/mesh")
	cfg.GRPCAddr, cfg.MonitoringAddr, cfg.DebugAddr = addr, "", ""
	cfg.DebounceAfter = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	d, err := istiod.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = d.Serve(ctx); close(done) }()
	return d, func() { cancel(); <-done }
}

// serve runs p on a socket in a temporary directory until the test ends,
// and returns the socket's path and a context that ends with the test.
func serve(t *testing.T, p *xdsproxy.Proxy) (string, context.Context) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "XDS")
	ln := grpcsocktest.Listen(t, sock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock, ctx
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func dial(t *testing.T, target string) *grpc.ClientConn {
	c, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// upstream is the proxy's connection to istiod at addr, closed when t ends.
func upstream(t *testing.T, addr string) *grpcwire.Conn {
	c, err := grpcwire.Dial(addr, grpcwire.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nodeBytes is node, encoded as the agent sends it.
func nodeBytes(t *testing.T) []byte {
	b, err := proto.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clusters subscribes to CDS on conn and returns the first response's resource payloads.
func clusters(t *testing.T, ctx context.Context, conn *grpc.ClientConn) (discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient, *discovery.DiscoveryResponse) {
	t.Helper()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: clusterType}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return s, resp
}

func payloads(resp *discovery.DiscoveryResponse) []string {
	var out []string
	for _, r := range resp.Resources {
		out = append(out, string(r.GetValue()))
	}
	slices.Sort(out)
	return out
}

func TestProxyCarriesStreamsAndKeepsTheNameTable(t *testing.T) {
	addr := freeAddr(t)
	stop := startIstiod(t, addr)
	defer func() { stop() }()

	var mu sync.Mutex
	var tables []*nds.NameTable
	p := xdsproxy.New(xdsproxy.Options{Upstream: upstream(t, addr), Node: nodeBytes(t), MaxBackoff: 200 * time.Millisecond, OwnStreamAfter: time.Millisecond,
		OnNameTable: func(nt *nds.NameTable) { mu.Lock(); tables = append(tables, nt); mu.Unlock() }}, slog.New(slog.DiscardHandler))
	sock, ctx := serve(t, p)
	polltest.Until(t, "the NameTable from istiod", p.TableLoaded)
	mu.Lock()
	if _, ok := tables[0].GetTable()["reviews.default.svc.cluster.local"]; !ok {
		t.Errorf("NameTable lacks reviews: %v", tables[0].GetTable())
	}
	mu.Unlock()

	// Through the socket, the same clusters as from istiod directly.
	via, viaResp := clusters(t, ctx, dial(t, "unix://"+sock))
	_, directResp := clusters(t, ctx, dial(t, addr))
	if got, want := payloads(viaResp), payloads(directResp); !slices.Equal(got, want) || len(got) == 0 {
		t.Errorf("via the agent %d clusters, directly %d, or they differ", len(got), len(want))
	}
	// ACK, then restart istiod: the downstream stream stays open and, once
	// istiod is back, gets the clusters again without asking.
	if err := via.Send(&discovery.DiscoveryRequest{TypeUrl: clusterType, VersionInfo: viaResp.VersionInfo, ResponseNonce: viaResp.Nonce}); err != nil {
		t.Fatal(err)
	}
	stop()
	got := make(chan *discovery.DiscoveryResponse, 1)
	errc := make(chan error, 1)
	go func() {
		resp, err := via.Recv()
		if err != nil {
			errc <- err
			return
		}
		got <- resp
	}()
	select {
	case err := <-errc:
		t.Fatalf("downstream stream ended while istiod was down: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	mu.Lock()
	before := len(tables)
	mu.Unlock()
	d, restarted := runIstiod(t, addr)
	stop = restarted
	select {
	case resp := <-got:
		if !slices.Equal(payloads(resp), payloads(viaResp)) {
			t.Error("clusters after reconnect differ")
		}
	case err := <-errc:
		t.Fatalf("downstream stream ended: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("no clusters after istiod came back")
	}
	// The NameTable moved to the downstream's stream once it came, and the
	// replay asks for it again there.
	polltest.Until(t, "the NameTable again, on the downstream's one stream", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tables) > before && slices.Equal(streams(d), []string{envoyWithNT})
	})
}
