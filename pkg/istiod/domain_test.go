package istiod_test

import (
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// domainRouting routes echo by header to subsets, naming the service by
// its short host: it resolves in istiod's cluster domain.
const domainRouting = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo]
  http:
  - match: [{headers: {x-version: {exact: v2}}}]
    route: [{destination: {host: echo, subset: v2}}]
  - route: [{destination: {host: echo, subset: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: echo
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}`

// TestProxylessDomain: istiod started with --domain corp.example serves
// grpc-go's real xDS client dialing xds:///echo.default.svc.corp.example,
// and the VirtualService and DestinationRule on the short host apply.
func TestProxylessDomain(t *testing.T) {
	const domain = "corp.example"
	m := proxylesstest.NewMesh(t)
	v1 := proxylesstest.StartBackend(t, "127.0.0.71", "v1", "version=v1")
	v2 := proxylesstest.StartBackend(t, "127.0.0.72", "v2", "version=v2")
	m.Write("echo.yaml", proxylesstest.Service("echo", "default", 7070, v1, v2)...)
	m.Write("routing.yaml", domainRouting)
	d := m.Start(func(c *istiod.Config) { c.Domain = domain })

	c := proxylesstest.Client(t, d.Addr("grpc"), proxylesstest.TargetIn("echo", "default", domain, 7070), "default")
	polltest.Within(t, 15*time.Second, "answers from v1 through "+proxylesstest.HostIn("echo", "default", domain), func() bool {
		name, err := proxylesstest.Call(t.Context(), c)
		return err == nil && name == "v1"
	})
	if got := proxylesstest.Tally(t.Context(), c, 10, "x-version", "v2"); got["v2"] != 10 {
		t.Errorf("x-version: v2 answered by %v, want v2 10 times", got)
	}
	if got := proxylesstest.Tally(t.Context(), c, 10); got["v1"] != 10 {
		t.Errorf("no header answered by %v, want v1 10 times", got)
	}
}
