package xds_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/keepalive"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const (
	productpage = "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"
	quiet       = 300 * time.Millisecond
	wait        = 5 * time.Second
)

// env is an xDS server on loopback serving the sample mesh; tests push
// changed inputs directly.
type env struct {
	srv  *xds.Server
	addr string
	in   *model.Inputs
	n    int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, xds.Options{})
}

// newEnvWith is newEnv with a server made with o (logs discarded unless
// o.Log is set).
func newEnvWith(t *testing.T, o xds.Options) *env {
	t.Helper()
	r := file.New(filepath.Join("..", "..", "..", "examples", "mesh"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	e := &env{srv: xds.New(o)}
	g := istiod.NewGRPCServer(nil, keepalive.ServerParameters{}, nil, o.Log)
	e.srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	e.push(t, r.Inputs())
	return e
}

// push makes in current and returns what changed.
func (e *env) push(t *testing.T, in *model.Inputs) model.Change {
	t.Helper()
	e.n++
	prev := e.srv.PushContext()
	pc := model.Rebuild(prev, in, "v"+strconv.Itoa(e.n))
	change := pc.Diff(prev)
	pc.Inherit(prev, change)
	e.srv.Push(pc, change)
	e.in = in
	return change
}

// with returns the current inputs with the objects of yaml added or
// replacing those of the same kind and name.
func (e *env) with(t *testing.T, yaml string) *model.Inputs {
	t.Helper()
	return xdstest.With(t, e.in, yaml)
}

func (e *env) sotw(t *testing.T, id string, meta map[string]string) *xdstest.SotW {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := xdstest.DialSotW(ctx, e.addr, xdstest.Node(id, meta))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); c.Close() })
	return c
}

func (e *env) delta(t *testing.T, id string) *xdstest.Delta {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := xdstest.DialDelta(ctx, e.addr, xdstest.Node(id, nil))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); c.Close() })
	return c
}

// status returns the sync state of typ ("CDS") for proxy id.
func (e *env) status(id, typ string) string {
	for _, ps := range e.srv.Status() {
		if ps.Proxy == id {
			return ps.Types[typ].Status
		}
	}
	return "not connected"
}

// waitStatus polls until the status is want (the server records ACKs
// asynchronously).
func (e *env) waitStatus(t *testing.T, id, typ, want string) {
	t.Helper()
	polltest.Within(t, wait, typ+" status "+want, func() bool { return e.status(id, typ) == want })
}

func recv(t *testing.T, c *xdstest.SotW) *discoveryv3.DiscoveryResponse {
	t.Helper()
	r, err := c.Recv(wait)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return r
}

func expectNone(t *testing.T, c *xdstest.SotW) {
	t.Helper()
	if r, err := c.Recv(quiet); err == nil {
		t.Fatalf("unexpected %s response (nonce %s, %d resources)", gen.ShortName(r.GetTypeUrl()), r.GetNonce(), len(r.GetResources()))
	}
}

// names returns the resource names of a response.
func names(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		m, err := xdstest.Validate(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, xdstest.Name(m))
	}
	return out
}

type refs struct{ *xdstest.Refs }

// refsOf collects what a response's resources reference.
func refsOf(t *testing.T, r *discoveryv3.DiscoveryResponse) refs {
	t.Helper()
	rf := &xdstest.Refs{Clusters: map[string]bool{}, Routes: map[string]bool{}, EDS: map[string]bool{}}
	for _, a := range r.GetResources() {
		if _, err := xdstest.Validate(a, rf); err != nil {
			t.Fatal(err)
		}
	}
	return refs{rf}
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (r refs) routes() []string { return sortedSet(r.Routes) }

// edsNames are the EDS clusters a CDS response names.
func edsNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	return sortedSet(refsOf(t, r).EDS)
}

// subscribeAll subscribes a sidecar to CDS, EDS, LDS and RDS, ACKing each,
// and returns the EDS and RDS names.
func subscribeAll(t *testing.T, c *xdstest.SotW) (eds, rds []string) {
	t.Helper()
	if err := c.Request(gen.ClusterType, nil, "", "", nil); err != nil {
		t.Fatal(err)
	}
	cds := recv(t, c)
	eds = edsNames(t, cds)
	must(t, c.Ack(cds, nil))
	must(t, c.Request(gen.EndpointType, eds, "", "", nil))
	must(t, c.Ack(recv(t, c), eds))
	must(t, c.Request(gen.ListenerType, nil, "", "", nil))
	lds := recv(t, c)
	must(t, c.Ack(lds, nil))
	rds = refsOf(t, lds).routes()
	must(t, c.Request(gen.RouteType, rds, "", "", nil))
	must(t, c.Ack(recv(t, c), rds))
	return eds, rds
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func fullChange() model.Change { return model.Change{Full: true} }
