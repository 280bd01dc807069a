package xds

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

func testResources(t *testing.T, n int, value string) []*gen.Resource {
	t.Helper()
	var rs []*gen.Resource
	for i := range n {
		name := fmt.Sprintf("res-%02d", i)
		r, err := gen.NewResourceForTest(name, wrapperspb.String(value+" of "+name))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestSharedBodyEncoding checks responses built around a shared body decode
// as the standard messages, as do those assembled per stream.
func TestSharedBodyEncoding(t *testing.T) {
	var bs bodies
	for _, n := range []int{1, minSharedBody, 3 * minSharedBody} {
		rs := testResources(t, n, "v")
		t.Run(fmt.Sprintf("sotw/%d", n), func(t *testing.T) {
			r := &sotwResponse{version: "v1", typeURL: "t", nonce: "n1", resources: rs, body: bs.get("t", false, rs)}
			if (r.body != nil) != (n >= minSharedBody) {
				t.Fatalf("%d resources: shared body %t", n, r.body != nil)
			}
			var got discoveryv3.DiscoveryResponse
			if err := proto.Unmarshal(r.encode().Materialize(), &got); err != nil {
				t.Fatal(err)
			}
			want := &discoveryv3.DiscoveryResponse{VersionInfo: "v1", TypeUrl: "t", Nonce: "n1"}
			for _, res := range rs {
				want.Resources = append(want.Resources, &anypb.Any{TypeUrl: res.Any.TypeUrl, Value: res.Any.Value})
			}
			if !proto.Equal(&got, want) {
				t.Fatalf("got %v\nwant %v", &got, want)
			}
		})
		t.Run(fmt.Sprintf("delta/%d", n), func(t *testing.T) {
			r := &deltaResponse{systemVersion: "v1", typeURL: "t", nonce: "n2", resources: rs, removed: []string{"gone"}, body: bs.get("t", true, rs)}
			var got discoveryv3.DeltaDiscoveryResponse
			if err := proto.Unmarshal(r.encode().Materialize(), &got); err != nil {
				t.Fatal(err)
			}
			want := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "v1", TypeUrl: "t", Nonce: "n2", RemovedResources: []string{"gone"}}
			for _, res := range rs {
				want.Resources = append(want.Resources, &discoveryv3.Resource{Name: res.Name, Version: res.Version, Resource: &anypb.Any{TypeUrl: res.Any.TypeUrl, Value: res.Any.Value}})
			}
			if !proto.Equal(&got, want) {
				t.Fatalf("got %v\nwant %v", &got, want)
			}
		})
	}
}

// TestSharedBodyReuse checks equal resource lists share one body and a
// changed resource gets its own.
func TestSharedBodyReuse(t *testing.T) {
	var bs bodies
	a := testResources(t, minSharedBody, "v")
	again := testResources(t, minSharedBody, "v") // equal content, new objects
	other := testResources(t, minSharedBody, "w")
	first := bs.get("t", false, a)
	if got := bs.get("t", false, again); &got[0] != &first[0] {
		t.Error("an equal resource list got a body of its own")
	}
	if got := bs.get("t", false, other); &got[0] == &first[0] {
		t.Error("changed resources got the old body")
	}
	if got := bs.get("t", true, a); &got[0] == &first[0] {
		t.Error("a delta response got the SotW body")
	}
}
