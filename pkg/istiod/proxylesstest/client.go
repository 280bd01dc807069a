package proxylesstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
)

// Bootstrap is a grpc-go xDS bootstrap to istiod at addr for a proxyless
// client with node IP ip in namespace ns, as Istio's agent writes it.
func Bootstrap(addr, ip, ns string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~%s~client.%s~%s.svc.cluster.local",
           "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q}},
  "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%%s"
}`, addr, ip, ns, ns, ns)
}

// Client dials target through grpc-go's xDS resolver as a plaintext
// proxyless client at 127.0.0.99 in namespace ns; closed when the test ends.
func Client(t testing.TB, addr, target, ns string, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	builder, err := xds.NewXDSResolverWithConfigForTesting(Bootstrap(addr, "127.0.0.99", ns))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder)}, opts...)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// Call makes one RPC with metadata md ("k", "v" pairs), waiting for the
// channel to be ready for at most 5 s, and returns the backend's name.
func Call(ctx context.Context, c testpb.TestServiceClient, md ...string) (string, error) {
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	return resp.GetHostname(), nil
}

// Tally makes n RPCs and counts the answers by backend name; errors are
// counted under their text.
func Tally(ctx context.Context, c testpb.TestServiceClient, n int, md ...string) map[string]int {
	counts := map[string]int{}
	for range n {
		name, err := Call(ctx, c, md...)
		if err != nil {
			name = "error: " + err.Error()
		}
		counts[name]++
	}
	return counts
}
