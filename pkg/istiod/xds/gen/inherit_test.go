package gen_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		in = with(t, in, y)
	}
	return in
}

// with returns in with the objects of yaml added or replacing those of the
// same kind and name; the other objects keep their pointers.
func with(t testing.TB, in *model.Inputs, yaml string) *model.Inputs {
	t.Helper()
	objs, errs := file.Parse("test.yaml", []byte(yaml))
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	out := *in
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Service:
			out.Services = replace(out.Services, v)
		case *discoveryv1.EndpointSlice:
			out.EndpointSlices = replace(out.EndpointSlices, v)
		case *networking.ServiceEntry:
			out.ServiceEntries = replace(out.ServiceEntries, v)
		case *networking.WorkloadEntry:
			out.WorkloadEntries = replace(out.WorkloadEntries, v)
		default:
			t.Fatalf("with: unsupported %T", o)
		}
	}
	return &out
}

func replace[T metav1.Object](list []T, o T) []T {
	out := slices.Clone(list)
	for i, x := range out {
		if x.GetNamespace() == o.GetNamespace() && x.GetName() == o.GetName() {
			out[i] = o
			return out
		}
	}
	return append(out, o)
}

const dbHost = "db.default.svc.cluster.local"

const headlessDB = `apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: tcp, port: 5432}]
`

func dbSlice(ip string) string {
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: default, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp, port: 5432}]
endpoints:
- {addresses: ["` + ip + `"]}
`
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
		{"headless service endpoints", []string{headlessDB, dbSlice("127.0.0.61")}, []string{dbSlice("127.0.0.62")}, dbHost,
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
				next = with(t, next, y)
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
	in := sampleInputs(t, headlessDB, dbSlice("127.0.0.61"))
	p := proxyFor(t, proxies[0])
	pc := model.BuildPushContext(in, "1")
	if got := nameTableIPs(t, pc, p, dbHost); !slices.Equal(got, []string{"127.0.0.61"}) {
		t.Fatalf("db in the name table: %v, want [127.0.0.61]", got)
	}
	for i, ip := range []string{"127.0.0.62", "127.0.0.63"} {
		in = with(t, in, dbSlice(ip))
		prev := pc
		pc = model.Rebuild(prev, in, strconv.Itoa(i+2))
		pc.Inherit(prev, pc.Diff(prev))
		if got := nameTableIPs(t, pc, p, dbHost); !slices.Equal(got, []string{ip}) {
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
