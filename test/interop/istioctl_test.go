package interop

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// grpcNode is the node id of the proxyless client the istioctl tests connect.
const grpcNode = "sidecar~127.0.0.99~" + grpcProxyID + "~default.svc.cluster.local"

// grpcProxyID is the client's proxy ID (POD.NS), as Istio names it in syncz.
const grpcProxyID = "interop-client.default"

// connectGRPCClient connects grpc-go's own xDS client to d as a proxyless
// client of reviews and waits until d reports all four types SYNCED.
func connectGRPCClient(t *testing.T, d *istiod.Istiod) {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default"}}
}`, d.Addr("grpc"), grpcNode)
	builder, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///reviews.default.svc.cluster.local:9080",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	cc.Connect()
	polltest.Within(t, 10*time.Second, "grpc client SYNCED on LDS, RDS, CDS, EDS", func() bool {
		for _, ps := range d.XDS().Status() {
			if ps.Proxy != grpcNode {
				continue
			}
			for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
				if ps.Types[typ].Status != "SYNCED" {
					return false
				}
			}
			return true
		}
		return false
	})
}

// istioctl runs Istio's istioctl against a plain-text xDS address. With
// --revision given it asks no API server, so its kubeconfig names a
// loopback port nothing listens on.
func istioctl(t *testing.T, xdsAddr string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := dummyKubeconfig(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	args = append(args, "--kubeconfig", kubeconfig, "--xds-address", xdsAddr, "--plaintext", "--timeout", "5s", "--revision", "default")
	cmd := exec.CommandContext(ctx, istiobin.Path(t, istiobin.Istioctl), args...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// debugAuthOff is Istio's ENABLE_DEBUG_ENDPOINT_AUTH=false: the debug
// types are served on the plaintext port.
func debugAuthOff(c *istiod.Config) { c.DebugAuthOff = true }

// TestIstioctlPlaintextNeedsDebugAuthOff: with debug endpoint
// authentication on (Istio's default), the plaintext port refuses Istio's
// istioctl, as Istio's istiod does.
func TestIstioctlPlaintextNeedsDebugAuthOff(t *testing.T) {
	istiobin.Path(t, istiobin.Istioctl)
	var logs logtest.Buffer
	d, _ := istiodtest.StartWith(t, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	out, err := istioctl(t, d.Addr("grpc"), "proxy-status")
	if err == nil {
		t.Fatalf("istioctl proxy-status on plaintext with debug auth on succeeded:\n%s", out)
	}
	// istioctl's ADS client logs the stream's status and then fails its wait
	// with "closed"; on a busy machine it can exit before that line is out.
	if !strings.Contains(out, "Unauthenticated") && !strings.Contains(out, "Error: closed") {
		t.Errorf("istioctl proxy-status: want Unauthenticated, or its stream closed:\n%s", out)
	}
	if !strings.Contains(logs.String(), "debug request refused: not authenticated") {
		t.Errorf("istiod did not refuse the request as unauthenticated; its log:\n%s", logs.String())
	}
}

// TestIstioctlProxyStatus: Istio's `istioctl proxy-status`, talking xDS
// (istio.io/debug/syncz) straight to Skiff's istiod, lists a connected
// proxyless client as SYNCED on each type it subscribes to.
func TestIstioctlProxyStatus(t *testing.T) {
	istiobin.Path(t, istiobin.Istioctl)
	d, _ := istiodtest.Start(t, debugAuthOff)
	connectGRPCClient(t, d)
	out, err := istioctl(t, d.Addr("grpc"), "proxy-status")
	if err != nil {
		t.Fatalf("istioctl proxy-status: %v\n%s", err, out)
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, grpcProxyID+" "):
			row = line
		case strings.HasPrefix(line, grpcNode+" "):
			t.Errorf("NAME is the whole node id %q, want the proxy ID %q as Istio's syncz names it", grpcNode, grpcProxyID)
		}
	}
	if row == "" {
		t.Fatalf("no row for %s:\n%s", grpcProxyID, out)
	}
	for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
		if !strings.Contains(row, typ) {
			t.Errorf("row lacks %s: %q", typ, row)
		}
	}
	if strings.Contains(row, "STALE") || strings.Contains(row, "ERROR") || strings.Contains(row, "NOT SENT") {
		t.Errorf("row not all synced: %q", row)
	}
	t.Logf("istioctl proxy-status:\n%s", out)

	out, err = istioctl(t, d.Addr("grpc"), "proxy-status", "-o", "json")
	if err != nil {
		t.Fatalf("istioctl proxy-status -o json: %v\n%s", err, out)
	}
	if !strings.Contains(out, grpcProxyID) {
		t.Errorf("json output lacks %s:\n%s", grpcProxyID, out)
	}
}

// TestIstioctlInternalDebugSyncz: Istio's `istioctl x internal-debug
// syncz` (type istio.io/debug, resource syncz) against Skiff's istiod
// prints the body of Skiff's /debug/syncz, which names the connected
// client; configz, analyze and config_dump likewise.
func TestIstioctlInternalDebugSyncz(t *testing.T) {
	istiobin.Path(t, istiobin.Istioctl)
	d, _ := istiodtest.Start(t, debugAuthOff)
	connectGRPCClient(t, d)
	out, err := istioctl(t, d.Addr("grpc"), "x", "internal-debug", "syncz")
	if err != nil {
		t.Fatalf("istioctl x internal-debug syncz: %v\n%s", err, out)
	}
	// The body of Skiff's /debug/syncz, which names the node.
	if !strings.Contains(out, `"proxy": "`+grpcNode+`"`) {
		t.Errorf("syncz output lacks %s:\n%s", grpcNode, out)
	}
	for _, tc := range []struct{ path, want string }{
		{"configz", `"version"`},
		{"analyze", `"count"`},
		// Skiff's config_dump, by type, of the client's stream.
		{"config_dump?proxyID=" + grpcNode, `"CDS"`},
	} {
		out, err = istioctl(t, d.Addr("grpc"), "x", "internal-debug", tc.path)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("istioctl x internal-debug %s: %v, want %s in:\n%s", tc.path, err, tc.want, out)
		}
	}
}
