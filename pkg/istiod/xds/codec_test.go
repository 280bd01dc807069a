package xds

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
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

// TestRequestDecode checks the lazily decoded SotW request: its names, in
// runs or scattered, and every other field.
func TestRequestDecode(t *testing.T) {
	long := string(make([]byte, 300)) // a two-byte length
	field := func(b []byte, num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	for _, tc := range []struct {
		name      string
		enc       []byte
		wantNames []string
		wantErr   bool
	}{
		{"no names", field(nil, 4, "t"), nil, false},
		{"a run", field(field(field(field(nil, 1, "v1"), 3, "a"), 3, "b"), 4, "t"), []string{"a", "b"}, false},
		{"names last", field(field(field(nil, 4, "t"), 3, "a"), 3, long), []string{"a", long}, false},
		{"scattered", field(field(field(field(nil, 3, "a"), 4, "t"), 3, "b"), 5, "n"), []string{"a", "b"}, false},
		{"truncated name", field(nil, 3, "abc")[:3], nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r rawRequest
			err := r.decode(tc.enc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("decode: %v, want error %t", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			var in interner
			if got := r.Names(&in); !slices.Equal(got, tc.wantNames) {
				t.Errorf("names %q, want %q", got, tc.wantNames)
			}
			var want discoveryv3.DiscoveryRequest
			if err := proto.Unmarshal(tc.enc, &want); err != nil {
				t.Fatal(err)
			}
			want.ResourceNames = nil
			if !proto.Equal(&r.req, &want) {
				t.Errorf("other fields %v, want %v", &r.req, &want)
			}
		})
	}
	// The same names hash alike however the other fields fall.
	var a, b rawRequest
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.decode(field(field(field(nil, 3, "x"), 3, "y"), 5, "n1")))
	must(b.decode(field(field(field(nil, 5, "n2"), 3, "x"), 3, "y")))
	if a.namesHash != b.namesHash {
		t.Error("equal names hash differently")
	}
}
