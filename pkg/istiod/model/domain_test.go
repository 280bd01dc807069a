package model_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

func TestResolveHostIn(t *testing.T) {
	for _, tt := range []struct{ host, ns, domain, want string }{
		{"reviews", "default", "", "reviews.default.svc.cluster.local"},
		{"reviews", "default", "cluster.local", "reviews.default.svc.cluster.local"},
		{"reviews", "shop", "corp.example", "reviews.shop.svc.corp.example"},
		{"reviews", "shop", ".Corp.Example.", "reviews.shop.svc.corp.example"},
		{"reviews.shop", "default", "corp.example", "reviews.shop"},
		{"reviews.shop.svc.cluster.local", "default", "corp.example", "reviews.shop.svc.cluster.local"},
		{"*", "default", "corp.example", "*"},
	} {
		if got := model.ResolveHostIn(tt.host, tt.ns, tt.domain); got != tt.want {
			t.Errorf("ResolveHostIn(%q, %q, %q) = %q, want %q", tt.host, tt.ns, tt.domain, got, tt.want)
		}
	}
	if got := model.ResolveHost("reviews", "default"); got != "reviews.default.svc."+model.DefaultDomain {
		t.Errorf("ResolveHost = %q, want the default domain", got)
	}
}

const domainMesh = `apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec: {clusterIP: 10.96.30.1, ports: [{name: http, port: 9080}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: data}
spec: {clusterIP: 10.96.30.2, ports: [{name: tcp, port: 5432}]}
---
apiVersion: v1
kind: Service
metadata: {name: cache, namespace: data}
spec: {clusterIP: 10.96.30.3, ports: [{name: tcp, port: 6379}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: data}
spec:
  hosts: [db.data.svc.cluster.local]
  tcp: [{route: [{destination: {host: db}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec: {host: reviews}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: data}
spec: {host: db.data.svc.corp.example}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress: [{hosts: ["./*", "data/db.data.svc.corp.example", "data/cache.data.svc.cluster.local"]}]
`

// TestDomain: the inputs' Domain names the Kubernetes services, and short
// hosts of VirtualServices and DestinationRules resolve under it; FQDNs in
// another domain match nothing.
func TestDomain(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(domainMesh), 0o644); err != nil {
		t.Fatal(err)
	}
	r := file.New(dir, slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatal(p)
	}
	meta, _ := structpb.NewStruct(nil)
	p, err := model.ParseProxy("sidecar~127.0.3.1~c.default~default.svc.corp.example", meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		domain  string
		hosts   []string // all services
		visible []string // in the default namespace's scope (its Sidecar)
		vs, dr  []string // hosts with a VirtualService, a DestinationRule
	}{
		{
			domain:  "",
			hosts:   []string{"cache.data.svc.cluster.local", "db.data.svc.cluster.local", "reviews.default.svc.cluster.local"},
			visible: []string{"cache.data.svc.cluster.local", "reviews.default.svc.cluster.local"},
			vs:      []string{"reviews.default.svc.cluster.local"},
			dr:      []string{"reviews.default.svc.cluster.local"},
		},
		{
			domain:  "corp.example",
			hosts:   []string{"cache.data.svc.corp.example", "db.data.svc.corp.example", "reviews.default.svc.corp.example"},
			visible: []string{"db.data.svc.corp.example", "reviews.default.svc.corp.example"},
			vs:      []string{"reviews.default.svc.corp.example"},
			dr:      []string{"db.data.svc.corp.example", "reviews.default.svc.corp.example"},
		},
	} {
		t.Run(model.Domain(tt.domain), func(t *testing.T) {
			in := *r.Inputs()
			in.Domain = tt.domain
			pc := model.BuildPushContext(&in, "1")
			if pc.Domain != model.Domain(tt.domain) {
				t.Errorf("Domain %q, want %q", pc.Domain, model.Domain(tt.domain))
			}
			var hosts []string
			for _, svc := range pc.Services {
				hosts = append(hosts, svc.Hostname)
			}
			if !slices.Equal(hosts, tt.hosts) {
				t.Errorf("services %q, want %q", hosts, tt.hosts)
			}
			sc := pc.ScopeFor(p)
			var visible []string
			for _, svc := range sc.Services {
				visible = append(visible, svc.Hostname)
			}
			if !slices.Equal(visible, tt.visible) {
				t.Errorf("visible %q, want %q", visible, tt.visible)
			}
			if got := sortedHosts(sc.VirtualService); !slices.Equal(got, tt.vs) {
				t.Errorf("VirtualService hosts %q, want %q", got, tt.vs)
			}
			if got := sortedHosts(sc.DestinationRule); !slices.Equal(got, tt.dr) {
				t.Errorf("DestinationRule hosts %q, want %q", got, tt.dr)
			}
			if got, want := sc.ResolveHost("db", "data"), "db.data.svc."+model.Domain(tt.domain); got != want {
				t.Errorf("scope ResolveHost = %q, want %q", got, want)
			}
		})
	}
}

// TestDomainChange: another domain with the same objects is a full change
// (the host names differ), not a reuse of the previous push.
func TestDomainChange(t *testing.T) {
	in := sample(t)
	prev := model.BuildPushContext(in, "1")
	next := *in
	next.Domain = "corp.example"
	pc := model.Rebuild(prev, &next, "2")
	if c := pc.Diff(prev); !c.Full {
		t.Fatalf("domain change: %+v, want a full change", c)
	}
	for _, svc := range pc.Services {
		if svc.Registry == model.RegistryKubernetes && !strings.HasSuffix(svc.Hostname, ".svc.corp.example") {
			t.Errorf("service %s after the domain change", svc.Hostname)
		}
	}
	if _, ok := pc.Endpoints["reviews.default.svc.corp.example"]; !ok {
		t.Error("no endpoints for reviews.default.svc.corp.example")
	}
	same := next
	if c := model.Rebuild(pc, &same, "3").Diff(pc); !c.Empty() {
		t.Errorf("same inputs and domain: %+v, want no change", c)
	}
	// An endpoint change is patched under the domain's host name.
	moved := movedRatings(t, &next)
	c := model.Rebuild(pc, moved, "4").Diff(pc)
	if _, ok := c.Hosts["ratings.default.svc.corp.example"]; c.Full || len(c.Hosts) != 1 || !ok {
		t.Errorf("endpoint change: %+v, want ratings.default.svc.corp.example only", c)
	}
}

func sortedHosts[V any](m map[string]V) []string {
	var out []string
	for h := range m {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
