package gen

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
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

// TestEntryIsCanonical checks that a resource marshaled straight into its
// entry is the DiscoveryResponse.resources element of its Any, as proto
// marshals it, with the version of its encoding; the sizes cross the
// one-, two- and three-byte lengths.
func TestEntryIsCanonical(t *testing.T) {
	for _, n := range []int{0, 100, 127, 128, 16000, 16383, 16384, 70000} {
		c := &clusterv3.Cluster{Name: strings.Repeat("c", n), AltStatName: "s"}
		r, err := newResource("r", c)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{r.Any}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.ResponseEntry(), want) {
			t.Errorf("name of %d bytes: entry differs from the marshaled response", n)
		}
		var back clusterv3.Cluster
		if err := r.Any.UnmarshalTo(&back); err != nil || !proto.Equal(&back, c) {
			t.Errorf("name of %d bytes: Any decodes to %v, %v", n, back.GetName() == c.Name, err)
		}
		if e := encodedResource("r", r.Any.TypeUrl, r.Any.Value); e.Version != r.Version || !bytes.Equal(e.entry, r.entry) {
			t.Errorf("name of %d bytes: encodedResource of the same bytes differs", n)
		}
	}
}
