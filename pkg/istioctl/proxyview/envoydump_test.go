package proxyview_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// envoyDump is Envoy's ConfigDump of one proxy, one resource of each type.
func envoyDump(t *testing.T) *adminv3.ConfigDump {
	t.Helper()
	host := "reviews.default.svc.cluster.local"
	cluster := &clusterv3.Cluster{Name: "outbound|9080||" + host, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}}
	listener := &listenerv3.Listener{Name: host + ":9080", Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: "10.0.0.50", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 9080}}}}}
	route := &routev3.RouteConfiguration{Name: host + ":9080", VirtualHosts: []*routev3.VirtualHost{{Name: host, Domains: []string{host}}}}
	eps := &endpointv3.ClusterLoadAssignment{ClusterName: cluster.Name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.1.2.3", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 9080}}}}}}}}}}}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{
		mustAny(t, &adminv3.BootstrapConfigDump{}),
		mustAny(t, &adminv3.ClustersConfigDump{VersionInfo: "v1", DynamicActiveClusters: []*adminv3.ClustersConfigDump_DynamicCluster{{Cluster: mustAny(t, cluster)}}}),
		mustAny(t, &adminv3.ListenersConfigDump{DynamicListeners: []*adminv3.ListenersConfigDump_DynamicListener{{Name: listener.Name,
			ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: mustAny(t, listener)}}}}),
		mustAny(t, &adminv3.RoutesConfigDump{DynamicRouteConfigs: []*adminv3.RoutesConfigDump_DynamicRouteConfig{{RouteConfig: mustAny(t, route)}}}),
		mustAny(t, &adminv3.EndpointsConfigDump{DynamicEndpointConfigs: []*adminv3.EndpointsConfigDump_DynamicEndpointConfig{{EndpointConfig: mustAny(t, eps)}}}),
		mustAny(t, &adminv3.SecretsConfigDump{}),
	}}
}

// TestConfigDumpOfIstio reads Istio's config dump (Envoy's ConfigDump in
// JSON, camelCase as Istio's istiod writes it) into the same tables as
// Skiff's.
func TestConfigDumpOfIstio(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts protojson.MarshalOptions
	}{
		{"camelCase", protojson.MarshalOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := tc.opts.Marshal(envoyDump(t))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/debug/syncz":
					w.Write([]byte(istioSyncz))
				case "/debug/config_dump":
					if r.URL.Query().Get("proxyID") != "sidecar~10.0.0.7~productpage-v1-6d8.default~default.svc.cluster.local" {
						http.NotFound(w, r)
						return
					}
					w.Write(body)
				}
			}))
			defer srv.Close()
			d, err := (&proxyview.Client{Istiod: srv.URL}).ConfigDump(context.Background(), "productpage-v1-6d8.default")
			if err != nil {
				t.Fatal(err)
			}
			for kind, want := range map[string][]string{
				"clusters":  {"reviews.default.svc.cluster.local", "9080", "outbound", "EDS"},
				"listeners": {"reviews.default.svc.cluster.local:9080", "10.0.0.50"},
				"routes":    {"reviews.default.svc.cluster.local:9080", "1"},
				"endpoints": {"10.1.2.3:9080", "HEALTHY", "outbound|9080||reviews.default.svc.cluster.local"},
			} {
				var b bytes.Buffer
				if err := proxyview.WriteConfig(&b, d, kind); err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(b.String()), "\n")
				if len(lines) != 2 {
					t.Errorf("%s: want a header and one row:\n%s", kind, b.String())
					continue
				}
				for _, w := range want {
					if !strings.Contains(lines[1], w) {
						t.Errorf("%s: row lacks %q:\n%s", kind, w, b.String())
					}
				}
			}
		})
	}
}
