package istiod_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"

	"github.com/skiff-mesh/skiff/pkg/istiod"
)

const reviewsTarget = "xds:///reviews.default.svc.cluster.local:9080"

// xdsClient dials target through grpc-go's xDS resolver, bootstrapped to
// istiod at addr as a proxyless client in namespace default.
func xdsClient(t *testing.T, addr, target string) testpb.TestServiceClient {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.99~client.default~default.svc.cluster.local",
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
func call(ctx context.Context, c testpb.TestServiceClient, md ...string) (string, error) {
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

// tally makes n RPCs and counts answers by backend.
func tally(t *testing.T, c testpb.TestServiceClient, n int, md ...string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range n {
		name, err := call(t.Context(), c, md...)
		if err != nil {
			t.Fatalf("rpc: %v", err)
		}
		counts[name]++
	}
	return counts
}

// eventually makes RPCs until k answers in a row include want and no
// answer from gone (with a split in force, k in a row of one backend is
// not what convergence means).
func eventually(t *testing.T, c testpb.TestServiceClient, want, gone string, k int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	run, seen := 0, false
	last := ""
	for time.Now().Before(deadline) {
		name, err := call(t.Context(), c)
		if err == nil && name != gone {
			run++
			seen = seen || name == want
			if run >= k && seen {
				return
			}
			continue
		}
		run, seen, last = 0, false, fmt.Sprint(name, err)
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never converged on %q without %q (last answer %s)", want, gone, last)
}

func TestProxylessGRPC(t *testing.T) {
	v1 := startBackend(t, "127.0.0.11", "v1")
	v2 := startBackend(t, "127.0.0.12", "v2")
	dir := meshDir(t, "reviews-endpoints.yaml")
	writeFile(t, filepath.Join(dir, "reviews-endpoints.yaml"), reviewsSlices(v1, v2))
	d := startIstiod(t, istiod.Config{ConfigDir: dir})
	client := xdsClient(t, d.Addr("grpc"), reviewsTarget)

	t.Run("split 90/10", func(t *testing.T) {
		const n = 1000
		counts := tally(t, client, n)
		// Binomial(1000, 0.1): mean 100, sd 9.5; allow 5 sd either way.
		if counts["v1"]+counts["v2"] != n || counts["v2"] < 53 || counts["v2"] > 147 {
			t.Fatalf("want about 900 v1 / 100 v2, got %v", counts)
		}
		t.Logf("observed %v", counts)
	})
	t.Run("header match", func(t *testing.T) {
		if counts := tally(t, client, 50, "end-user", "jason"); counts["v2"] != 50 {
			t.Fatalf("end-user: jason should always reach v2, got %v", counts)
		}
	})
	t.Run("VirtualService edit converges", func(t *testing.T) {
		vsPath := filepath.Join(dir, "reviews.yaml")
		b, err := os.ReadFile(vsPath)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(strings.Replace(string(b), "weight: 90", "weight: 0", 1), "weight: 10", "weight: 100", 1)
		writeFile(t, vsPath, edited)
		eventually(t, client, "v2", "v1", 100)
		writeFile(t, vsPath, string(b))
		eventually(t, client, "v1", "", 50)
	})
	t.Run("EndpointSlice edit converges", func(t *testing.T) {
		v1b := startBackend(t, "127.0.0.13", "v1b")
		slices := strings.Replace(reviewsSlices(v1b, v2), `"127.0.0.11"`, `"127.0.0.13"`, 1)
		writeFile(t, filepath.Join(dir, "reviews-endpoints.yaml"), slices)
		eventually(t, client, "v1b", "v1", 100)
	})
	t.Run("syncz", func(t *testing.T) {
		for _, ps := range d.XDS().Status() {
			if ps.Generator != "grpc" {
				continue
			}
			for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
				if got := ps.Types[typ].Status; got != "SYNCED" {
					t.Errorf("%s %s: %s, want SYNCED", ps.Proxy, typ, got)
				}
			}
			return
		}
		t.Fatal("gRPC client not in syncz")
	})
}
