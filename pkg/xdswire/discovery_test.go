package xdswire_test

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

func sampleNode(t testing.TB) *corev3.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"CLUSTER_ID":    "Kubernetes",
		"LABELS":        map[string]any{"app": "reviews", "version": "v1"},
		"ISTIO_VERSION": "1.28.0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{
		Id:             "sidecar~10.1.2.3~reviews-v1-abc.default~default.svc.cluster.local",
		Cluster:        "reviews.default",
		Metadata:       md,
		UserAgentName:  "envoy",
		ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning"},
	}
}

func sampleStatus() *status.Status {
	return &status.Status{Code: 3, Message: "cluster foo: invalid", Details: []*anypb.Any{{TypeUrl: "x", Value: []byte{1}}}}
}

func discoveryRequests(t testing.TB) map[string]*discoveryv3.DiscoveryRequest {
	return map[string]*discoveryv3.DiscoveryRequest{
		"empty": {},
		"first": {Node: sampleNode(t), TypeUrl: clusterType},
		"ack": {
			VersionInfo: "2024-01-01T00:00:00Z/7", ResourceNames: []string{"a", "", "outbound|80||b.ns.svc.cluster.local"},
			TypeUrl: clusterType, ResponseNonce: "nonce-ü",
		},
		"nack":                  {VersionInfo: "6", TypeUrl: clusterType, ResponseNonce: "n", ErrorDetail: sampleStatus()},
		"empty node and status": {Node: &corev3.Node{}, ErrorDetail: &status.Status{}},
		"locators": {
			TypeUrl: clusterType, ResourceNames: []string{"a"},
			ResourceLocators: []*discoveryv3.ResourceLocator{{Name: "a", DynamicParameters: map[string]string{"k": "v"}}},
		},
	}
}

func TestDiscoveryRequest(t *testing.T) {
	for name, g := range discoveryRequests(t) {
		t.Run(name, func(t *testing.T) {
			want := modeledDiscoveryRequest(g)
			r, err := xdswire.DecodeDiscoveryRequest(marshal(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if got := genDiscoveryRequest(t, r); !proto.Equal(got, want) {
				t.Errorf("decoded\n%v\nwant\n%v", got, want)
			}
			out := r.Marshal()
			got := &discoveryv3.DiscoveryRequest{}
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

func discoveryResponses() map[string]*discoveryv3.DiscoveryResponse {
	big := bytes.Repeat([]byte{0xab}, 70000) // a length varint of three bytes
	return map[string]*discoveryv3.DiscoveryResponse{
		"empty": {},
		"full": {
			VersionInfo: "v9", TypeUrl: clusterType, Nonce: "abc",
			Resources: []*anypb.Any{
				{TypeUrl: clusterType, Value: []byte("cluster one")},
				{},
				{TypeUrl: clusterType, Value: big},
			},
		},
		"unmodeled": {
			VersionInfo: "1", Canary: true, ControlPlane: &corev3.ControlPlane{Identifier: "istiod-1"},
			ResourceErrors: []*discoveryv3.ResourceError{{ErrorDetail: sampleStatus()}},
		},
	}
}

func TestDiscoveryResponse(t *testing.T) {
	for name, g := range discoveryResponses() {
		t.Run(name, func(t *testing.T) {
			want := modeledDiscoveryResponse(g)
			r, err := xdswire.DecodeDiscoveryResponse(marshal(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if got := genDiscoveryResponse(r); !proto.Equal(got, want) {
				t.Errorf("decoded\n%v\nwant\n%v", got, want)
			}
			out := r.Marshal()
			got := &discoveryv3.DiscoveryResponse{}
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("marshaled\n%v\nwant\n%v", got, want)
			}
			if !bytes.Equal(out, marshal(t, want)) {
				t.Errorf("marshaled bytes differ from the generated encoding")
			}
		})
	}
}

// TestDiscoveryRequestMerge checks the wire rules the generated code follows
// for fields that occur more than once: two encoded messages concatenated
// decode as the first merged with the second.
func TestDiscoveryRequestMerge(t *testing.T) {
	a := &discoveryv3.DiscoveryRequest{
		VersionInfo: "1", Node: &corev3.Node{Id: "a", Cluster: "c"}, ResourceNames: []string{"x"},
		ErrorDetail: &status.Status{Code: 2, Message: "m"},
	}
	b := &discoveryv3.DiscoveryRequest{
		VersionInfo: "2", Node: &corev3.Node{Id: "b"}, ResourceNames: []string{"y"},
		ErrorDetail: &status.Status{Code: 5},
	}
	in := append(marshal(t, a), marshal(t, b)...)
	want := &discoveryv3.DiscoveryRequest{}
	if err := proto.Unmarshal(in, want); err != nil {
		t.Fatal(err)
	}
	r, err := xdswire.DecodeDiscoveryRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := genDiscoveryRequest(t, r); !proto.Equal(got, want) {
		t.Errorf("decoded\n%v\nwant\n%v", got, want)
	}
}

// TestDecodeSkipsUnknown checks that unknown fields of every wire type,
// groups included, are skipped.
func TestDecodeSkipsUnknown(t *testing.T) {
	g := &discoveryv3.DiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "n"}
	in := marshal(t, g)
	in = protowire.AppendTag(in, 100, protowire.VarintType)
	in = protowire.AppendVarint(in, 1<<40)
	in = protowire.AppendTag(in, 101, protowire.Fixed32Type)
	in = protowire.AppendFixed32(in, 7)
	in = protowire.AppendTag(in, 102, protowire.Fixed64Type)
	in = protowire.AppendFixed64(in, 7)
	in = protowire.AppendTag(in, 103, protowire.StartGroupType)
	in = protowire.AppendTag(in, 1, protowire.BytesType) // inside the group: not version_info
	in = protowire.AppendString(in, "hidden")
	in = protowire.AppendTag(in, 103, protowire.EndGroupType)
	r, err := xdswire.DecodeDiscoveryRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := genDiscoveryRequest(t, r); !proto.Equal(got, g) {
		t.Errorf("decoded\n%v\nwant\n%v", got, g)
	}
}

// TestDecodeAliasing checks that decoded []byte fields cannot be grown over
// the input that follows them.
func TestDecodeAliasing(t *testing.T) {
	g := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "a"}, TypeUrl: clusterType}
	in := marshal(t, g)
	r, err := xdswire.DecodeDiscoveryRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(r.Node, 0xff, 0xff, 0xff, 0xff)
	if !bytes.Equal(in, marshal(t, g)) {
		t.Error("appending to the decoded Node changed the input")
	}
}
