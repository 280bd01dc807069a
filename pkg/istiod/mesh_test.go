package istiod_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// outboundDefault returns the cluster the virtualOutbound listener sends
// unknown destinations to, from an LDS response.
func outboundDefault(t *testing.T, c *xdstest.SotW) string {
	t.Helper()
	r, err := c.Recv(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(r, nil); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.GetResources() {
		var l listenerv3.Listener
		if err := a.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		if l.GetName() != "virtualOutbound" {
			continue
		}
		for _, f := range l.GetDefaultFilterChain().GetFilters() {
			var tp tcpv3.TcpProxy
			if f.GetTypedConfig().UnmarshalTo(&tp) == nil {
				return tp.GetCluster()
			}
		}
	}
	t.Fatal("no virtualOutbound listener with a tcp_proxy default chain")
	return ""
}

// TestMeshConfigFollowed: istiod reads --meshConfig and pushes again when
// it changes; here the mesh's outboundTrafficPolicy decides where a
// sidecar sends destinations outside the registry.
func TestMeshConfigFollowed(t *testing.T) {
	meshFile := filepath.Join(t.TempDir(), "mesh")
	writeFile(t, meshFile, "trustDomain: cluster.local\n")
	d := startIstiod(t, istiod.Config{ConfigDir: meshDir(t), MeshConfigFile: meshFile})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := xdstest.DialSotW(ctx, d.Addr("grpc"), xdstest.Node(productpage, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Request(gen.ListenerType, nil, "", "", nil); err != nil {
		t.Fatal(err)
	}
	if got := outboundDefault(t, c); got != gen.PassthroughCluster {
		t.Fatalf("default mesh: unknown destinations go to %q, want %s", got, gen.PassthroughCluster)
	}
	writeFile(t, meshFile, "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n")
	if got := outboundDefault(t, c); got != gen.BlackHoleCluster {
		t.Fatalf("REGISTRY_ONLY mesh: unknown destinations go to %q, want %s", got, gen.BlackHoleCluster)
	}
}
