package proxyview_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
)

// istioSyncz is written from the fields of Istio 1.31's SyncStatus and
// ResourceStatus (pilot/pkg/xds/debug.go): one sidecar with CDS acked, LDS
// sent but not acked, RDS rejected and EDS not sent; one that predates the
// resources map (only the flat nonces); one connected with nothing sent.
const istioSyncz = `[
 {"cluster_id": "Kubernetes", "proxy": "sidecar~10.0.0.7~productpage-v1-6d8.default~default.svc.cluster.local",
  "proxy_type": "sidecar", "istio_version": "1.31.0",
  "cluster_sent": "c1", "cluster_acked": "c1", "listener_sent": "l2", "listener_acked": "l1", "route_sent": "r1",
  "resources": {
   "type.googleapis.com/envoy.config.cluster.v3.Cluster": {"sent": "c1", "acked": "c1", "sentTime": "2026-12-01T10:00:00Z"},
   "type.googleapis.com/envoy.config.listener.v3.Listener": {"sent": "l2", "acked": "l1", "sentTime": "2026-12-01T10:00:01Z"},
   "type.googleapis.com/envoy.config.route.v3.RouteConfiguration": {"sent": "r1", "sentTime": "2026-12-01T10:00:02Z", "lastError": "route: bad regex"}
  }},
 {"cluster_id": "east", "proxy": "sidecar~10.0.0.8~ratings-v1-7f.default~default.svc.cluster.local", "proxy_type": "sidecar",
  "istio_version": "1.30.2", "cluster_sent": "a", "cluster_acked": "a", "endpoint_sent": "e", "endpoint_acked": "e"},
 {"cluster_id": "Kubernetes", "proxy": "sidecar~10.0.0.9~cart-0.shop~shop.svc.cluster.local", "proxy_type": "sidecar"}
]`

const skiffSyncz = `[{"proxy": "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local", "connection_id": "x-1",
 "delta": false, "connected_at": "2026-12-01T10:00:00Z", "cluster_id": "Kubernetes", "istio_version": "1.31.0",
 "types": {"CDS": {"status": "SYNCED", "sent": "n1", "acked": "n1"}, "LDS": {"status": "NOT SENT"}}}]`

func TestParseSyncz(t *testing.T) {
	pp := "sidecar~10.0.0.7~productpage-v1-6d8.default~default.svc.cluster.local"
	for _, tc := range []struct {
		name, body string
		want       []proxyview.ProxyStatus
		err        bool
	}{
		{"istio", istioSyncz, []proxyview.ProxyStatus{
			{Proxy: pp, ClusterID: "Kubernetes", IstioVersion: "1.31.0", Types: map[string]proxyview.TypeStatus{
				"CDS": {Status: "SYNCED"}, "LDS": {Status: "STALE"}, "RDS": {Status: "ERROR", Error: "route: bad regex"}}},
			{Proxy: "sidecar~10.0.0.8~ratings-v1-7f.default~default.svc.cluster.local", ClusterID: "east", IstioVersion: "1.30.2",
				Types: map[string]proxyview.TypeStatus{"CDS": {Status: "SYNCED"}, "EDS": {Status: "SYNCED"}}},
			{Proxy: "sidecar~10.0.0.9~cart-0.shop~shop.svc.cluster.local", ClusterID: "Kubernetes", Types: map[string]proxyview.TypeStatus{}},
		}, false},
		{"skiff", skiffSyncz, []proxyview.ProxyStatus{
			{Proxy: "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local", ClusterID: "Kubernetes", IstioVersion: "1.31.0",
				Types: map[string]proxyview.TypeStatus{"CDS": {Status: "SYNCED"}, "LDS": {Status: "NOT SENT"}}},
		}, false},
		{"empty", `[]`, []proxyview.ProxyStatus{}, false},
		{"neither format", `[{"proxy": "sidecar~1.2.3.4~a.b~b.svc.cluster.local", "state": "ok"}]`, nil, true},
		{"no proxy id", `[{"types": {}}]`, nil, true},
		{"not a list", `{"proxies": []}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proxyview.ParseSyncz([]byte(tc.body))
			if tc.err {
				if !errors.Is(err, proxyview.ErrSynczFormat) {
					t.Fatalf("err = %v, want ErrSynczFormat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusTableOfIstio prints Istio's syncz: the states, clusters and
// versions the proxies reported, "-" where they reported nothing.
func TestStatusTableOfIstio(t *testing.T) {
	streams, err := proxyview.ParseSyncz([]byte(istioSyncz))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := proxyview.WriteStatus(&b, streams, "istiod-5d8f9-abcde", ""); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		got = append(got, strings.Split(strings.Join(strings.Fields(strings.ReplaceAll(l, "NOT SENT", "NOT_SENT")), " "), " "))
	}
	want := [][]string{
		{"cart-0.shop", "Kubernetes", "NOT_SENT", "NOT_SENT", "NOT_SENT", "NOT_SENT", "NOT_SENT", "istiod-5d8f9-abcde", "-"},
		{"productpage-v1-6d8.default", "Kubernetes", "SYNCED", "STALE", "NOT_SENT", "ERROR", "NOT_SENT", "istiod-5d8f9-abcde", "1.31.0"},
		{"ratings-v1-7f.default", "east", "SYNCED", "NOT_SENT", "SYNCED", "NOT_SENT", "NOT_SENT", "istiod-5d8f9-abcde", "1.30.2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s\n%s", diff, b.String())
	}
}

// TestStatusToken sends the token as Istio's istiod reads it, and tells a
// 401 apart.
func TestStatusToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(istioSyncz))
	}))
	defer srv.Close()
	ctx := context.Background()
	if s, err := (&proxyview.Client{Istiod: srv.URL, Token: "tok"}).Status(ctx); err != nil || len(s) != 3 {
		t.Fatalf("with a token: %d proxies, %v", len(s), err)
	}
	if _, err := (&proxyview.Client{Istiod: srv.URL}).Status(ctx); !errors.Is(err, proxyview.ErrUnauthorized) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without a token: %v", err)
	}
}

// TestConfigDumpUnknownFormat refuses a config dump in neither format
// plainly instead of showing empty tables.
func TestConfigDumpUnknownFormat(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/syncz":
			w.Write([]byte(istioSyncz))
		case "/debug/config_dump":
			w.Write([]byte(`{"clusters": []}`))
		}
	}))
	defer srv.Close()
	_, err := (&proxyview.Client{Istiod: srv.URL}).ConfigDump(context.Background(), "productpage-v1-6d8.default")
	if !errors.Is(err, proxyview.ErrDumpFormat) {
		t.Fatalf("err = %v, want ErrDumpFormat", err)
	}
}
