package istiod_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
)

const reviewsTarget = "xds:///reviews.default.svc.cluster.local:9080"

// tally makes n RPCs and counts answers by backend; any error fails.
func tally(t *testing.T, c testpb.TestServiceClient, n int, md ...string) map[string]int {
	t.Helper()
	counts := proxylesstest.Tally(t.Context(), c, n, md...)
	for k := range counts {
		if strings.HasPrefix(k, "error: ") {
			t.Fatalf("rpc: %v", counts)
		}
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
		name, err := proxylesstest.Call(t.Context(), c)
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
	v1 := proxylesstest.StartBackend(t, "127.0.0.11", "v1")
	v2 := proxylesstest.StartBackend(t, "127.0.0.12", "v2")
	dir := meshDir(t, "reviews-endpoints.yaml")
	writeFile(t, filepath.Join(dir, "reviews-endpoints.yaml"), reviewsSlices(v1, v2))
	d := startIstiod(t, istiod.Config{ConfigDir: dir})
	client := proxylesstest.Client(t, d.Addr("grpc"), reviewsTarget, "default")

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
		v1b := proxylesstest.StartBackend(t, "127.0.0.13", "v1b")
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
