package proxyview_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const (
	cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
)

// TestViewsOfARealProxy connects a SotW client to a real istiod as a
// sidecar, ACKs CDS and LDS, and reads the views back from istiod's debug port.
func TestViewsOfARealProxy(t *testing.T) {
	d, ctx := istiodtest.Start(t, nil)

	conn, err := grpc.NewClient(d.Addr("grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"}
	for _, typ := range []string{cds, lds} {
		s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typ})
		node = nil
	}
	acked := map[string]bool{}
	for len(acked) < 2 {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce})
		acked[resp.TypeUrl] = true
	}

	c := &proxyview.Client{Istiod: "http://" + d.Addr("debug")}
	// istiod records the ACKs asynchronously: wait until it has both.
	var table string
	polltest.Wait(polltest.Timeout, func() bool {
		streams, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		proxyview.WriteStatus(&b, streams, "istiod-test", "skiff")
		table = b.String()
		return strings.Count(table, "SYNCED") >= 2
	})
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "ECDS") {
		t.Fatalf("proxy-status table:\n%s", table)
	}
	f := strings.Fields(lines[1])
	if f[0] != "productpage-0.default" || f[2] != "SYNCED" || f[3] != "SYNCED" {
		t.Errorf("proxy-status row: %q (want CDS and LDS SYNCED)\n%s", f, table)
	}

	dump, err := c.ConfigDump(ctx, "productpage-0.default")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := proxyview.WriteConfig(&b, dump, "clusters"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "reviews.default.svc.cluster.local") || !strings.Contains(b.String(), "outbound") {
		t.Errorf("clusters:\n%s", b.String())
	}
	b.Reset()
	proxyview.WriteConfig(&b, dump, "listeners")
	if !strings.Contains(b.String(), "virtualOutbound") {
		t.Errorf("listeners:\n%s", b.String())
	}
	if _, err := c.ConfigDump(ctx, "nobody.default"); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("unknown proxy: %v", err)
	}
}

// agentCerts is an agent's /debug/certs as pkg/agent/certs writes it
// (certs.TestDescribeJSON pins the same field names on the agent's side).
const agentCerts = `[
 {"name": "default", "type": "Cert Chain", "valid": true, "serial": "1f2e", "not_after": "2026-12-02T11:00:00Z", "not_before": "2026-12-01T10:59:00Z"},
 {"name": "ROOTCA", "type": "CA", "valid": true, "serial": "a1", "not_after": "2036-12-01T10:00:00Z", "not_before": "2026-12-01T09:59:00Z"}
]`

func TestSecretsFromTheAgent(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/certs" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, agentCerts)
	}))
	defer agent.Close()
	secrets, err := (&proxyview.Client{}).Secrets(context.Background(), agent.URL)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := proxyview.WriteSecrets(&b, secrets); err != nil {
		t.Fatal(err)
	}
	want := `RESOURCE NAME   TYPE         STATUS   VALID CERT   SERIAL NUMBER   NOT AFTER              NOT BEFORE
default         Cert Chain   ACTIVE   true         1f2e            2026-12-02T11:00:00Z   2026-12-01T10:59:00Z
ROOTCA          CA           ACTIVE   true         a1              2036-12-01T10:00:00Z   2026-12-01T09:59:00Z
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("secret table (-want +got):\n%s", diff)
	}
}
