package gen_test

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// sampleInputs loads examples/mesh with the objects of yaml added or
// replacing those of the same kind and name.
func sampleInputs(t testing.TB, yaml ...string) *model.Inputs {
	t.Helper()
	r := file.New(filepath.Join("..", "..", "..", "..", "examples", "mesh"), slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	in := r.Inputs()
	for _, y := range yaml {
		in = xdstest.With(t, in, y)
	}
	return in
}

const legacyEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy, namespace: default}
spec:
  hosts: [legacy.example.com]
  location: MESH_INTERNAL
  resolution: DNS
  ports: [{number: 8080, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: legacy}}
`

func legacyWorkload(addr string) string {
	return `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: legacy-1, namespace: default}
spec: {address: ` + addr + `, labels: {app: legacy}}
`
}

const ratingsSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ratings-x1, namespace: default, labels: {kubernetes.io/service-name: ratings}}
addressType: IPv4
ports: [{name: http, port: 9080}]
endpoints:
- {addresses: ["127.0.0.21"], zone: zone-a, targetRef: {kind: Pod, name: ratings-v1-0}}
- {addresses: ["127.0.0.29"], zone: zone-a, targetRef: {kind: Pod, name: ratings-v1-0}}
`

// TestInheritAcrossEndpointChange makes an endpoint-only change, carries
// the cache over with Inherit, and checks every type for productpage:
// those built from the changed endpoints are rebuilt (and ReadsEndpoints
// says so), the others are the very resources of the previous push, and
// all equal a build from scratch.
func TestInheritAcrossEndpointChange(t *testing.T) {
	for _, tc := range []struct {
		name         string
		base, change []string
		host         string
		rebuilt      []string // the types built from the changed endpoints
	}{
		{"headless service endpoints", []string{xdstest.HeadlessDB, xdstest.DBSlice("127.0.0.61")}, []string{xdstest.DBSlice("127.0.0.62")}, xdstest.DBHost,
			[]string{gen.EndpointType, gen.NameTableType}},
		{"workload entry of a DNS service entry", []string{legacyEntry, legacyWorkload("10.0.0.1")}, []string{legacyWorkload("10.0.0.2")}, "legacy.example.com",
			[]string{gen.ClusterType}},
		{"endpoints of a service with a cluster IP", nil, []string{ratingsSlice}, "ratings.default.svc.cluster.local",
			[]string{gen.EndpointType}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleInputs(t, tc.base...)
			next := in
			for _, y := range tc.change {
				next = xdstest.With(t, next, y)
			}
			p := proxyFor(t, proxies[0])
			prev := model.BuildPushContext(in, "1")
			before := generate(t, prev, p)
			pc := model.Rebuild(prev, next, "2")
			change := pc.Diff(prev)
			if _, ok := change.Hosts[tc.host]; change.Full || len(change.Hosts) != 1 || !ok {
				t.Fatalf("change %+v, want the endpoints of %s only", change, tc.host)
			}
			pc.Inherit(prev, change)
			after := generate(t, pc, p)
			scratch := generate(t, model.BuildPushContext(next, "2"), p)
			for _, typ := range gen.PushOrder() {
				name := gen.ShortName(typ)
				if !sameContent(after[typ], scratch[typ]) {
					t.Errorf("%s after Inherit differs from a build from scratch", name)
				}
				rebuilt := slices.Contains(tc.rebuilt, typ)
				if got := gen.ReadsEndpoints(pc, p, typ, change.Hosts); got != rebuilt {
					t.Errorf("ReadsEndpoints(%s) = %t, want %t", name, got, rebuilt)
				}
				switch {
				case rebuilt && sameContent(after[typ], before[typ]):
					t.Errorf("%s did not change; the test changes nothing it reads", name)
				case !rebuilt && !slices.Equal(after[typ], before[typ]):
					t.Errorf("%s was rebuilt, want the previous push's resources", name)
				}
			}
		})
	}
}

// TestNameTableFollowsHeadlessEndpoints checks the name table lists a
// headless service's endpoint addresses after an endpoint-only change.
func TestNameTableFollowsHeadlessEndpoints(t *testing.T) {
	in := sampleInputs(t, xdstest.HeadlessDB, xdstest.DBSlice("127.0.0.61"))
	p := proxyFor(t, proxies[0])
	pc := model.BuildPushContext(in, "1")
	if got := nameTableIPs(t, pc, p, xdstest.DBHost); !slices.Equal(got, []string{"127.0.0.61"}) {
		t.Fatalf("db in the name table: %v, want [127.0.0.61]", got)
	}
	for i, ip := range []string{"127.0.0.62", "127.0.0.63"} {
		in = xdstest.With(t, in, xdstest.DBSlice(ip))
		prev := pc
		pc = model.Rebuild(prev, in, strconv.Itoa(i+2))
		pc.Inherit(prev, pc.Diff(prev))
		if got := nameTableIPs(t, pc, p, xdstest.DBHost); !slices.Equal(got, []string{ip}) {
			t.Fatalf("db in the name table after its endpoints moved: %v, want [%s]", got, ip)
		}
	}
}

func nameTableIPs(t *testing.T, pc *model.PushContext, p *model.Proxy, host string) []string {
	t.Helper()
	rs, err := gen.Generate(pc, p, gen.NameTableType, nil)
	if err != nil || len(rs) != 1 {
		t.Fatalf("NDS: %d resources, %v", len(rs), err)
	}
	m, err := xdstest.Validate(rs[0].Any, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*nds.NameTable).GetTable()[host].GetIps()
}

// generate returns every type for p (all names).
func generate(t *testing.T, pc *model.PushContext, p *model.Proxy) map[string][]*gen.Resource {
	t.Helper()
	out := map[string][]*gen.Resource{}
	for _, typ := range gen.PushOrder() {
		rs, err := gen.Generate(pc, p, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[typ] = rs
	}
	return out
}

func sameContent(a, b []*gen.Resource) bool {
	return slices.EqualFunc(a, b, func(x, y *gen.Resource) bool { return x.Hash == y.Hash })
}
