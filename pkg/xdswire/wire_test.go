package xdswire_test

import (
	"bytes"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// requestWithLocators is a DiscoveryRequest with resource_locators (field
// 7), which this package does not model, and an unknown field 99.
func requestWithLocators(t *testing.T) (*discoveryv3.DiscoveryRequest, []byte) {
	g := &discoveryv3.DiscoveryRequest{
		VersionInfo: "3", Node: sampleNode(t), ResourceNames: []string{"a", "b"}, TypeUrl: clusterType,
		ResponseNonce: "n", ResourceLocators: []*discoveryv3.ResourceLocator{
			{Name: "a", DynamicParameters: map[string]string{"x": "1"}}, {Name: "b"},
		},
	}
	b := marshal(t, g)
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendString(b, "future")
	return g, b
}

func TestStripAndPrepend(t *testing.T) {
	g, in := requestWithLocators(t)
	orig := bytes.Clone(in)

	stripped := xdswire.StripFields(in, 2, 5)
	got := &discoveryv3.DiscoveryRequest{}
	if err := proto.Unmarshal(stripped, got); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(g).(*discoveryv3.DiscoveryRequest)
	want.Node, want.ResponseNonce = nil, ""
	if unk := got.ProtoReflect().GetUnknown(); string(unk) != "\x9a\x06\x06future" {
		t.Errorf("unknown field not kept: %x", unk)
	}
	got.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(got, want) {
		t.Errorf("stripped\n%v\nwant\n%v", got, want)
	}
	if !bytes.Equal(in, orig) {
		t.Error("StripFields changed its input")
	}
	if got := xdswire.StripFields(in); !bytes.Equal(got, in) {
		t.Error("StripFields with no numbers changed the message")
	}
	if got := xdswire.StripFields(in, 42); !bytes.Equal(got, in) {
		t.Error("StripFields of an absent field changed the message")
	}

	node := marshal(t, &corev3.Node{Id: "replaced"})
	replaced := xdswire.PrependField(xdswire.StripFields(in, 2), 2, node)
	got = &discoveryv3.DiscoveryRequest{}
	if err := proto.Unmarshal(replaced, got); err != nil {
		t.Fatal(err)
	}
	want = proto.Clone(g).(*discoveryv3.DiscoveryRequest)
	want.Node = &corev3.Node{Id: "replaced"}
	got.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(got, want) {
		t.Errorf("replaced\n%v\nwant\n%v", got, want)
	}
	if !bytes.HasPrefix(replaced, []byte{0x12, byte(len(node))}) {
		t.Errorf("the field is not first: %x", replaced[:4])
	}
	if id, found, err := xdswire.FieldString(replaced, 4); err != nil || !found || id != clusterType {
		t.Errorf("FieldString(type_url) = %q, %v, %v", id, found, err)
	}

	// Stripping every occurrence of a repeated field, wherever it is.
	twice := append(marshal(t, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"x"}, TypeUrl: "t"}),
		marshal(t, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"y"}})...)
	if got := xdswire.StripFields(twice, 3); !bytes.Equal(got, marshal(t, &discoveryv3.DiscoveryRequest{TypeUrl: "t"})) {
		t.Errorf("StripFields(repeated) = %x", got)
	}
	// Malformed input: the unparsable rest is kept.
	bad := append(marshal(t, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"x"}, TypeUrl: "t"}), 0x22, 0x05, 'a')
	if got, want := xdswire.StripFields(bad, 3), bad[3:]; !bytes.Equal(got, want) {
		t.Errorf("StripFields(truncated) = %x, want %x", got, want)
	}
}

func TestFieldString(t *testing.T) {
	_, in := requestWithLocators(t)
	tests := []struct {
		name      string
		in        []byte
		num       protowire.Number
		want      string
		wantFound bool
		wantErr   string
	}{
		{name: "type_url", in: in, num: 4, want: clusterType, wantFound: true},
		{name: "first of repeated", in: in, num: 3, want: "a", wantFound: true},
		{name: "unknown field", in: in, num: 99, want: "future", wantFound: true},
		{name: "absent", in: in, num: 6},
		{name: "empty message", num: 1},
		{name: "wrong wire type", in: []byte{0x08, 0x01}, num: 1, wantErr: "wire type varint, want bytes"},
		{name: "truncated before", in: []byte{0x0a, 0x05, 'a'}, num: 2, wantErr: "unexpected EOF"},
		{name: "bad tag", in: []byte{0x00}, num: 2, wantErr: "field tag"},
		{name: "found before garbage", in: []byte{0x0a, 0x01, 'a', 0xff}, num: 1, want: "a", wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := xdswire.FieldString(tt.in, tt.num)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FieldString = %q, %v, %v; want error containing %q", got, found, err, tt.wantErr)
				}
				return
			}
			if err != nil || found != tt.wantFound || got != tt.want {
				t.Errorf("FieldString = %q, %v, %v; want %q, %v", got, found, err, tt.want, tt.wantFound)
			}
		})
	}
}

func TestPrependFieldLong(t *testing.T) {
	v := bytes.Repeat([]byte{1}, 200)
	got := xdswire.PrependField([]byte{0x08, 0x01}, 2, v)
	want := append(append([]byte{0x12, 0xc8, 0x01}, v...), 0x08, 0x01)
	if !bytes.Equal(got, want) {
		t.Errorf("PrependField = %x", got)
	}
}
