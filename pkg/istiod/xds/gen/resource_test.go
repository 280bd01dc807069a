package gen

import (
	"errors"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// TestResourceErrorsAreKept checks that a message that cannot be marshaled,
// directly or inside an Any, yields a resource that makes its list fail,
// never a nil resource, a panic or a list without it.
func TestResourceErrorsAreKept(t *testing.T) {
	bad := "outbound|80||bad\xff.default.svc.cluster.local"
	for _, tc := range []struct {
		name string
		msg  *clusterv3.Cluster
	}{
		{"bad name", &clusterv3.Cluster{Name: bad}},
		{"bad nested Any", &clusterv3.Cluster{Name: "outbound|80||good", TransportSocket: &corev3.TransportSocket{Name: "tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{Sni: bad})}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, err := newResource("good", &clusterv3.Cluster{Name: "good"})
			if err != nil {
				t.Fatal(err)
			}
			rs := marshalAll([]*clusterv3.Cluster{{Name: "a"}, tc.msg}, func(c *clusterv3.Cluster) string { return c.GetName() })
			if len(rs) != 2 {
				t.Fatalf("marshalAll kept %d of 2 resources", len(rs))
			}
			var re *ResourceError
			if err := failed(append(rs, good)); !errors.As(err, &re) || re.Name != tc.msg.GetName() {
				t.Fatalf("failed = %v, want a ResourceError naming %q", err, tc.msg.GetName())
			}
			if err := failed([]*Resource{good}); err != nil {
				t.Errorf("failed on good resources: %v", err)
			}
		})
	}
}
