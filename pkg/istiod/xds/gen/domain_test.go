package gen_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// corpDomain is the cluster domain of the domain tests.
const corpDomain = "corp.example"

// domainMesh loads examples/mesh served under domain, its host names
// written in that domain.
func domainMesh(t *testing.T, domain string) *model.PushContext {
	t.Helper()
	src := filepath.Join("..", "..", "..", "..", "examples", "mesh")
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/mesh: %v %v", files, err)
	}
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), ".svc.cluster.local", ".svc."+domain))
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := file.New(dir, slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("sample mesh in %s has problems: %v", domain, p)
	}
	in := *r.Inputs()
	in.Domain = domain
	return model.BuildPushContext(&in, "v1")
}

// inDomain is c with its node id and requested names in domain.
func inDomain(c proxyCase, domain string) proxyCase {
	c.id = strings.ReplaceAll(c.id, ".svc.cluster.local", ".svc."+domain)
	names := map[string][]string{}
	for typ, ns := range c.names {
		for _, n := range ns {
			names[typ] = append(names[typ], strings.ReplaceAll(n, ".svc.cluster.local", ".svc."+domain))
		}
	}
	c.names = names
	return c
}

// svcHost matches the Kubernetes host names in generated config.
var svcHost = regexp.MustCompile(`\.svc\.[a-z0-9.-]*[a-z0-9]`)

// TestDomainGolden renders the sample mesh served under corp.example: every
// Kubernetes host name (clusters, routes' virtual hosts, listeners, name
// table, gRPC targets) is NAME.NS.svc.corp.example, and short hosts in the
// configuration resolve under it.
func TestDomainGolden(t *testing.T) {
	pc := domainMesh(t, corpDomain)
	for _, c := range []proxyCase{proxies[0], proxies[3]} {
		c = inDomain(c, corpDomain)
		t.Run(c.name, func(t *testing.T) {
			cfg := generateAll(t, pc, c)
			if err := xdstest.Check(cfg, gen.ClusterType, gen.RouteType, gen.EndpointType); err != nil {
				t.Error(err)
			}
			got := renderJSON(t, cfg)
			for _, m := range svcHost.FindAllString(string(got), -1) {
				if m != ".svc."+corpDomain {
					t.Errorf("host in %q, want every Kubernetes host in %s", m, corpDomain)
					break
				}
			}
			checkGolden(t, filepath.Join("testdata", "domain", c.name+".golden.json"), got, "DomainGolden")
			// Only the names differ from the sample mesh under cluster.local.
			want, err := os.ReadFile(filepath.Join("testdata", c.name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != strings.ReplaceAll(string(want), ".svc.cluster.local", ".svc."+corpDomain) {
				t.Errorf("config under %s is not the cluster.local golden with the domain replaced", corpDomain)
			}
		})
	}
}

// TestDomainNames checks the names a domain changes, for both domains: the
// name table's keys and short names, and the gRPC targets a client may dial.
func TestDomainNames(t *testing.T) {
	for _, domain := range []string{model.DefaultDomain, corpDomain} {
		t.Run(domain, func(t *testing.T) {
			pc := domainMesh(t, domain)
			p := proxyFor(t, inDomain(proxies[0], domain))
			rs, err := gen.Generate(pc, p, gen.NameTableType, nil)
			if err != nil || len(rs) != 1 {
				t.Fatalf("NDS: %d resources, %v", len(rs), err)
			}
			m, err := xdstest.Validate(rs[0].Any, nil)
			if err != nil {
				t.Fatal(err)
			}
			reviews := "reviews.default.svc." + domain
			ni := m.(*nds.NameTable).GetTable()[reviews]
			if ni == nil || ni.GetShortname() != "reviews" || ni.GetNamespace() != "default" || len(ni.GetIps()) == 0 {
				t.Errorf("name table entry of %s: %v", reviews, ni)
			}
			for host := range m.(*nds.NameTable).GetTable() {
				if strings.Contains(host, ".svc.") && !strings.HasSuffix(host, ".svc."+domain) {
					t.Errorf("name table host %s, want it in %s", host, domain)
				}
			}

			grpcP := proxyFor(t, inDomain(proxies[3], domain))
			for _, target := range []string{reviews + ":9080", "reviews.default:9080", "reviews:9080"} {
				rs, err := gen.Generate(pc, grpcP, gen.ListenerType, []string{target})
				if err != nil || len(rs) != 1 {
					t.Errorf("gRPC listener %s: %d resources, %v", target, len(rs), err)
				}
			}
			other := "reviews.default.svc." + map[string]string{model.DefaultDomain: corpDomain, corpDomain: model.DefaultDomain}[domain] + ":9080"
			if rs, err := gen.Generate(pc, grpcP, gen.ListenerType, []string{other}); err != nil || len(rs) != 0 {
				t.Errorf("gRPC listener %s in the other domain: %d resources, %v; want none", other, len(rs), err)
			}
		})
	}
}
