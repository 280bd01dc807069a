package model_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/file"
)

const egressServices = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: apps}
spec:
  clusterIP: 10.96.20.1
  ports: [{name: http, port: 8080}, {name: http-admin, port: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: apps}
spec:
  clusterIP: 10.96.20.2
  ports: [{name: tcp, port: 3306}]
`

// TestScopeEgress checks Sidecar egress listeners bound to ports and the
// outbound traffic policy a scope takes from its Sidecar.
func TestScopeEgress(t *testing.T) {
	for _, c := range []struct {
		name    string
		sidecar string // spec, empty: no Sidecar
		ports   map[string][]uint16
		mode    model.OutboundMode
	}{
		{"no sidecar", "", map[string][]uint16{"web": {8080, 9090}, "db": {3306}}, model.OutboundAllowAny},
		{"all hosts", `egress: [{hosts: ["*/*"]}]`, map[string][]uint16{"web": {8080, 9090}, "db": {3306}}, model.OutboundAllowAny},
		{"port bound", `egress:
  - {port: {number: 8080, protocol: HTTP, name: http}, hosts: [apps/web.apps.svc.cluster.local]}
  - {hosts: [apps/db.apps.svc.cluster.local]}
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}`, map[string][]uint16{"web": {8080}, "db": {3306}}, model.OutboundRegistryOnly},
		{"port bound only", `egress:
  - {port: {number: 9090, protocol: HTTP, name: http}, hosts: ["*/*"]}
  outboundTrafficPolicy: {mode: ALLOW_ANY}`, map[string][]uint16{"web": {9090}}, model.OutboundAllowAny},
		{"policy without mode is REGISTRY_ONLY", `egress: [{hosts: ["*/*"]}]
  outboundTrafficPolicy: {egressProxy: {host: egress.apps.svc.cluster.local, port: {number: 80}}}`,
			map[string][]uint16{"web": {8080, 9090}, "db": {3306}}, model.OutboundRegistryOnly},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			docs := egressServices
			if c.sidecar != "" {
				docs += "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: client}\nspec:\n  " + c.sidecar + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(docs), 0o644); err != nil {
				t.Fatal(err)
			}
			r := file.New(dir, slog.New(slog.DiscardHandler))
			if err := r.Load(); err != nil {
				t.Fatal(err)
			}
			if p := r.Problems(); len(p) > 0 {
				t.Fatal(p)
			}
			pc := model.BuildPushContext(r.Inputs(), "1")
			meta, _ := structpb.NewStruct(nil)
			p, err := model.ParseProxy("sidecar~127.0.3.1~c.client~client.svc.cluster.local", meta)
			if err != nil {
				t.Fatal(err)
			}
			sc := pc.ScopeFor(p)
			got := map[string][]uint16{}
			for _, svc := range sc.Services {
				for _, port := range svc.Ports {
					got[svc.Name] = append(got[svc.Name], port.Port)
				}
				if sc.Service(svc.Hostname) != svc {
					t.Errorf("Service(%s) is not the scope's service", svc.Hostname)
				}
			}
			if len(got) != len(c.ports) {
				t.Fatalf("visible ports %v, want %v", got, c.ports)
			}
			for name, want := range c.ports {
				if !slices.Equal(got[name], want) {
					t.Errorf("%s: ports %v, want %v", name, got[name], want)
				}
			}
			if sc.OutboundPolicy != c.mode {
				t.Errorf("outbound policy %v, want %v", sc.OutboundPolicy, c.mode)
			}
		})
	}
}

func TestMeshOutboundMode(t *testing.T) {
	if m := model.MeshOutboundMode(nil); m != model.OutboundAllowAny {
		t.Errorf("nil mesh config: %v", m)
	}
	rm := &meshconfig.MeshConfig{OutboundTrafficPolicy: &meshconfig.MeshConfig_OutboundTrafficPolicy{Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY}}
	if m := model.MeshOutboundMode(rm); m != model.OutboundRegistryOnly {
		t.Errorf("REGISTRY_ONLY mesh config: %v", m)
	}
}
