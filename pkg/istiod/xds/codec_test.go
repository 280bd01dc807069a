package xds

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// TestDeltaEncoding checks a delta response assembled from shared bytes
// decodes as the standard message.
func TestDeltaEncoding(t *testing.T) {
	var rs []*gen.Resource
	for _, n := range []string{"a", "bb"} {
		r, err := gen.NewResourceForTest(n, wrapperspb.String("value of "+n))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	r := &deltaResponse{systemVersion: "v1", typeURL: "t", nonce: "n1", resources: rs, removed: []string{"gone"}}
	var got discoveryv3.DeltaDiscoveryResponse
	if err := proto.Unmarshal(r.encode().Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	want := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "v1", TypeUrl: "t", Nonce: "n1", RemovedResources: []string{"gone"}}
	for _, res := range rs {
		want.Resources = append(want.Resources, &discoveryv3.Resource{Name: res.Name, Version: res.Version, Resource: &anypb.Any{TypeUrl: res.Any.TypeUrl, Value: res.Any.Value}})
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("got %v\nwant %v", &got, want)
	}
}
