package ha_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"
)

// backend is a gRPC server answering with its name.
type backend struct {
	testpb.UnimplementedTestServiceServer
	name string
	port int32
}

func (b *backend) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Hostname: b.name}, nil
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, port: int32(lis.Addr().(*net.TCPAddr).Port)}
	g := grpc.NewServer()
	testpb.RegisterTestServiceServer(g, b)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return b
}

// xdsClient dials target through grpc-go's xDS resolver, bootstrapped to
// the control plane at addr as a proxyless client in namespace default.
func xdsClient(t *testing.T, addr, target string) testpb.TestServiceClient {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.98~client.default~default.svc.cluster.local",
           "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default"}}
}`, addr)
	builder, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// call makes one RPC and returns the backend's name.
func call(ctx context.Context, c testpb.TestServiceClient) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	return resp.GetHostname(), nil
}
