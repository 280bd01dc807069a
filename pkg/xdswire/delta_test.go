package xdswire_test

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

func deltaRequests(t testing.TB) map[string]*discoveryv3.DeltaDiscoveryRequest {
	return map[string]*discoveryv3.DeltaDiscoveryRequest{
		"empty": {},
		"first": {
			Node: sampleNode(t), TypeUrl: clusterType, ResourceNamesSubscribe: []string{"*"},
			InitialResourceVersions: map[string]string{"b": "2", "a": "1", "": "", "ünï": "3"},
		},
		"ack": {
			TypeUrl: clusterType, ResourceNamesSubscribe: []string{"x", ""}, ResourceNamesUnsubscribe: []string{"y", "z"},
			ResponseNonce: "n1",
		},
		"nack": {TypeUrl: clusterType, ResponseNonce: "n2", ErrorDetail: sampleStatus()},
		"locators": {
			TypeUrl:                     clusterType,
			ResourceLocatorsSubscribe:   []*discoveryv3.ResourceLocator{{Name: "a"}},
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{{Name: "b"}},
		},
		"empty node and status": {Node: &corev3.Node{}, ErrorDetail: &status.Status{}},
	}
}

func TestDeltaDiscoveryRequest(t *testing.T) {
	for name, g := range deltaRequests(t) {
		t.Run(name, func(t *testing.T) {
			want := modeledDeltaRequest(g)
			r, err := xdswire.DecodeDeltaDiscoveryRequest(marshal(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if got := genDeltaRequest(t, r); !proto.Equal(got, want) {
				t.Errorf("decoded\n%v\nwant\n%v", got, want)
			}
			out := r.Marshal()
			got := &discoveryv3.DeltaDiscoveryRequest{}
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("marshaled\n%v\nwant\n%v", got, want)
			}
			if wantb := marshal(t, want); !bytes.Equal(out, wantb) {
				t.Errorf("marshaled %x\nwant      %x", out, wantb)
			}
		})
	}
}

func deltaResponses() map[string]*discoveryv3.DeltaDiscoveryResponse {
	return map[string]*discoveryv3.DeltaDiscoveryResponse{
		"empty": {},
		"full": {
			SystemVersionInfo: "sys-1", TypeUrl: clusterType, Nonce: "n", RemovedResources: []string{"gone", ""},
			Resources: []*discoveryv3.Resource{
				{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: clusterType, Value: []byte("A")}},
				{Name: "b", Resource: &anypb.Any{}},
				{},
				{Version: "3", Resource: &anypb.Any{TypeUrl: clusterType, Value: bytes.Repeat([]byte("c"), 300)}},
			},
		},
		"unmodeled": {
			Resources: []*discoveryv3.Resource{{
				Name: "a", Aliases: []string{"b"}, Ttl: durationpb.New(5e9),
				ResourceName: &discoveryv3.ResourceName{Name: "a"},
				CacheControl: &discoveryv3.Resource_CacheControl{DoNotCache: true},
				Metadata:     &corev3.Metadata{FilterMetadata: nil},
			}},
			RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "r"}},
			ControlPlane:         &corev3.ControlPlane{Identifier: "istiod"},
			ResourceErrors:       []*discoveryv3.ResourceError{{ErrorDetail: sampleStatus()}},
		},
	}
}

func TestDeltaDiscoveryResponse(t *testing.T) {
	for name, g := range deltaResponses() {
		t.Run(name, func(t *testing.T) {
			want := modeledDeltaResponse(g)
			r, err := xdswire.DecodeDeltaDiscoveryResponse(marshal(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if got := genDeltaResponse(r); !proto.Equal(got, want) {
				t.Errorf("decoded\n%v\nwant\n%v", got, want)
			}
			out := r.Marshal()
			got := &discoveryv3.DeltaDiscoveryResponse{}
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("marshaled\n%v\nwant\n%v", got, want)
			}
			if wantb := marshal(t, want); !bytes.Equal(out, wantb) {
				t.Errorf("marshaled %x\nwant      %x", out, wantb)
			}
		})
	}
}

// TestDeltaMerge checks repeated occurrences against the generated code:
// map entries for the same key (the last wins), repeated embedded messages
// (merged) and repeated fields (appended).
func TestDeltaMerge(t *testing.T) {
	a := &discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "a"}, InitialResourceVersions: map[string]string{"k": "1", "j": "0"},
		ResourceNamesSubscribe: []string{"x"}, ErrorDetail: &status.Status{Message: "m"},
	}
	b := &discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Cluster: "c"}, InitialResourceVersions: map[string]string{"k": "2"},
		ResourceNamesSubscribe: []string{"y"}, ErrorDetail: &status.Status{Code: 4},
	}
	in := append(marshal(t, a), marshal(t, b)...)
	want := &discoveryv3.DeltaDiscoveryRequest{}
	if err := proto.Unmarshal(in, want); err != nil {
		t.Fatal(err)
	}
	r, err := xdswire.DecodeDeltaDiscoveryRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := genDeltaRequest(t, r); !proto.Equal(got, want) {
		t.Errorf("decoded\n%v\nwant\n%v", got, want)
	}

	ra := &discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "a"}}, Nonce: "1"}
	rb := &discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "b"}}, RemovedResources: []string{"c"}}
	in = append(marshal(t, ra), marshal(t, rb)...)
	wantResp := &discoveryv3.DeltaDiscoveryResponse{}
	if err := proto.Unmarshal(in, wantResp); err != nil {
		t.Fatal(err)
	}
	resp, err := xdswire.DecodeDeltaDiscoveryResponse(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := genDeltaResponse(resp); !proto.Equal(got, wantResp) {
		t.Errorf("decoded\n%v\nwant\n%v", got, wantResp)
	}
}
