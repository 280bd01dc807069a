package xds

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// FuzzRawRequest: a state-of-the-world request from a sidecar, decoded
// with its names left encoded, is what protobuf's decoder reads from the
// same bytes, and bytes it refuses are refused without a panic.
func FuzzRawRequest(f *testing.F) {
	for _, m := range []*discoveryv3.DiscoveryRequest{
		{TypeUrl: "t", ResourceNames: []string{"a", "b"}, ResponseNonce: "n", VersionInfo: "v"},
		{ResourceNames: []string{"x"}, TypeUrl: "t"},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x01, 'a', 0x22, 0x01, 't', 0x1a, 0x01, 'b'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want discoveryv3.DiscoveryRequest
		wantErr := proto.Unmarshal(b, &want)
		var r rawRequest
		err := r.decode(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decode: %v, protobuf: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if got := r.Names(&interner{}); !slices.Equal(got, want.GetResourceNames()) {
			t.Errorf("names %q, protobuf %q", got, want.GetResourceNames())
		}
		want.ResourceNames = nil
		if !proto.Equal(&r.req, &want) {
			t.Errorf("fields %v, protobuf %v", &r.req, &want)
		}
	})
}
