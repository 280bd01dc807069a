package gen_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sampleMesh loads examples/mesh.
func sampleMesh(t *testing.T) *model.PushContext {
	t.Helper()
	r := file.New(filepath.Join("..", "..", "..", "..", "examples", "mesh"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("sample mesh has problems: %v", p)
	}
	return model.BuildPushContext(r.Inputs(), "v1")
}

type proxyCase struct {
	name  string
	id    string
	meta  map[string]any
	names map[string][]string // requested names per type (gRPC)
}

const grpcTarget = "reviews.default.svc.cluster.local:9080"

var proxies = []proxyCase{
	{name: "productpage", id: "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"},
	{name: "reviews-v1", id: "sidecar~127.0.0.11~reviews-v1-0.default~default.svc.cluster.local"},
	{name: "cart-shop", id: "sidecar~127.0.0.51~cart-0.shop~shop.svc.cluster.local"},
	{name: "grpc-client", id: "sidecar~127.0.0.99~client.default~default.svc.cluster.local",
		meta: map[string]any{"GENERATOR": "grpc"},
		names: map[string][]string{
			gen.ListenerType: {grpcTarget},
			gen.RouteType:    {grpcTarget},
			gen.ClusterType: {"outbound|9080|v1|reviews.default.svc.cluster.local",
				"outbound|9080|v2|reviews.default.svc.cluster.local", "outbound|9080||reviews.default.svc.cluster.local"},
			gen.EndpointType: {"outbound|9080|v1|reviews.default.svc.cluster.local",
				"outbound|9080|v2|reviews.default.svc.cluster.local", "outbound|9080||reviews.default.svc.cluster.local"},
		}},
}

func proxyFor(t testing.TB, c proxyCase) *model.Proxy {
	t.Helper()
	meta, err := structpb.NewStruct(c.meta)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.ParseProxy(c.id, meta)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// generateAll returns every type for a proxy, asking for EDS and RDS names
// the way a client would: those its clusters and listeners name.
func generateAll(t *testing.T, pc *model.PushContext, c proxyCase) xdstest.Config {
	t.Helper()
	p := proxyFor(t, c)
	cfg := xdstest.Config{}
	for _, typ := range gen.PushOrder() {
		rs, err := gen.Generate(pc, p, typ, c.names[typ])
		if err != nil {
			t.Fatalf("%s %s: %v", c.name, gen.ShortName(typ), err)
		}
		for _, r := range rs {
			cfg[typ] = append(cfg[typ], r.Any)
		}
	}
	return cfg
}

func TestSampleMeshValid(t *testing.T) {
	pc := sampleMesh(t)
	for _, c := range proxies {
		t.Run(c.name, func(t *testing.T) {
			cfg := generateAll(t, pc, c)
			for _, typ := range []string{gen.ClusterType, gen.ListenerType, gen.RouteType, gen.EndpointType} {
				if len(cfg[typ]) == 0 {
					t.Errorf("no %s resources", gen.ShortName(typ))
				}
			}
			if err := xdstest.Check(cfg, gen.ClusterType, gen.RouteType, gen.EndpointType); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestGolden(t *testing.T) {
	pc := sampleMesh(t)
	for _, c := range proxies {
		t.Run(c.name, func(t *testing.T) {
			cfg := generateAll(t, pc, c)
			got := renderJSON(t, cfg)
			checkGolden(t, filepath.Join("testdata", c.name+".golden.json"), got, "Golden")
		})
	}
}

// renderJSON prints a config as stable, indented JSON, types in push order.
func renderJSON(t *testing.T, cfg xdstest.Config) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("{\n")
	first := true
	for _, typ := range gen.PushOrder() {
		if len(cfg[typ]) == 0 {
			continue
		}
		if !first {
			buf.WriteString(",\n")
		}
		first = false
		buf.WriteString(`"` + gen.ShortName(typ) + `": [`)
		for i, a := range cfg[typ] {
			if i > 0 {
				buf.WriteString(",")
			}
			buf.Write(anyJSON(t, a))
		}
		buf.WriteString("]")
	}
	buf.WriteString("\n}\n")
	var out bytes.Buffer
	if err := json.Indent(&out, compact(t, buf.Bytes()), "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	return out.Bytes()
}

// anyJSON renders a resource as protojson does; a NameTable, plain Go,
// with encoding/json, whose tags give protojson's field names.
func anyJSON(t *testing.T, a *anypb.Any) []byte {
	if a.GetTypeUrl() == nds.TypeURL {
		var nt nds.NameTable
		if err := nt.Unmarshal(a.GetValue()); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(&nt)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return out.Bytes()
}

// TestResponseEntry checks a response assembled from entries decodes as
// the resources themselves.
func TestResponseEntry(t *testing.T) {
	pc := sampleMesh(t)
	rs, err := gen.Generate(pc, proxyFor(t, proxies[0]), gen.ClusterType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, r := range rs {
		b = append(b, r.ResponseEntry()...)
	}
	var resp discoveryv3.DiscoveryResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != len(rs) {
		t.Fatalf("%d resources decoded, want %d", len(resp.Resources), len(rs))
	}
	for i, a := range resp.Resources {
		if !proto.Equal(a, rs[i].Any) {
			t.Fatalf("resource %d differs", i)
		}
	}
}

// checkGolden compares got with the golden file at path, rewriting it with
// -update; run names the test to rerun with -update.
func checkGolden(t *testing.T, path string, got []byte, run string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the generated config; run `go test ./pkg/istiod/xds/gen -run %s -update` and review the diff", path, run)
	}
}
