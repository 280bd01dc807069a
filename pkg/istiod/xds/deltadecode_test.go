package xds

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// reconnectRequest is what a sidecar sends for EDS when it reconnects:
// its subscriptions and a version for each of n resources it holds.
func reconnectRequest(n int) *discoveryv3.DeltaDiscoveryRequest {
	req := &discoveryv3.DeltaDiscoveryRequest{
		Node:                    &corev3.Node{Id: "sidecar~10.0.0.1~app-0.default~default.svc.cluster.local"},
		TypeUrl:                 "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
		InitialResourceVersions: map[string]string{},
	}
	for i := range n {
		name := fmt.Sprintf("outbound|8080||svc-%04d.bench.svc.cluster.local", i)
		req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, name)
		req.InitialResourceVersions[name] = fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	return req
}

// entry is one initial_resource_versions field of raw entry bytes.
func entry(e ...byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, versionsField, protowire.BytesType), e)
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestDecodeDelta holds decodeDelta to protobuf's decoder on requests
// with versions: the map and every other field the same, and the same
// verdict on bytes that are not a request.
func TestDecodeDelta(t *testing.T) {
	whole, err := proto.Marshal(reconnectRequest(50))
	if err != nil {
		t.Fatal(err)
	}
	typeURL := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "t")
	for _, c := range []struct {
		name    string
		b       []byte
		wantErr bool
	}{
		{"a reconnect", whole, false},
		{"no versions", typeURL, false},
		{"versions between other fields", cat(typeURL, entry(0x0a, 1, 'a', 0x12, 1, '1'), typeURL, entry(0x0a, 1, 'b')), false},
		{"a repeated key: the last", cat(entry(0x0a, 1, 'a', 0x12, 1, '1'), entry(0x0a, 1, 'a', 0x12, 1, '2')), false},
		{"an empty entry", entry(), false},
		{"value before key, an unknown field", entry(0x12, 1, 'v', 0x18, 7, 0x0a, 1, 'k'), false},
		{"a key of another wire type", entry(0x08, 5, 0x12, 1, 'v'), false},
		{"field 5 not length-delimited", cat(protowire.AppendVarint(protowire.AppendTag(nil, versionsField, protowire.VarintType), 3), typeURL), false},
		{"a key not UTF-8", entry(0x0a, 1, 0xff), true},
		{"a value not UTF-8", entry(0x0a, 1, 'k', 0x12, 2, 0xc3, 0x28), true},
		{"an entry cut short", entry(0x0a, 5, 'a'), true},
		{"a field number out of range in an entry", entry(0x80, 0x80, 0x80, 0x80, 0x10, 0), true},
		{"a request cut short", whole[:len(whole)-3], true},
		{"a name not UTF-8", cat(typeURL, protowire.AppendBytes(protowire.AppendTag(nil, subscribeField, protowire.BytesType), []byte{0xff})), true},
		{"names, unsubscribed names and no versions", cat(
			protowire.AppendString(protowire.AppendTag(nil, unsubscribeField, protowire.BytesType), "gone"), typeURL,
			protowire.AppendString(protowire.AppendTag(nil, subscribeField, protowire.BytesType), "a"),
			protowire.AppendString(protowire.AppendTag(nil, subscribeField, protowire.BytesType), "*")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want discoveryv3.DeltaDiscoveryRequest
			wantErr := proto.Unmarshal(c.b, &want)
			if (wantErr != nil) != c.wantErr {
				t.Fatalf("protobuf: %v; the case expects an error: %t", wantErr, c.wantErr)
			}
			got, err := decodeDelta(c.b)
			if (err != nil) != c.wantErr {
				t.Fatalf("decodeDelta: %v, protobuf: %v", err, wantErr)
			}
			if err == nil && !proto.Equal(got, &want) {
				t.Errorf("decodeDelta %v\nprotobuf %v", got, &want)
			}
		})
	}
}

// FuzzDecodeDelta: whatever the bytes, decodeDelta gives protobuf's
// verdict and, on success, the request protobuf decodes.
func FuzzDecodeDelta(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		b, err := proto.Marshal(reconnectRequest(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(cat(entry(0x0a, 1, 'a', 0x12, 1, '1'), entry(0x12, 1, 'v', 0x18, 7, 0x0a, 1, 'k')))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want discoveryv3.DeltaDiscoveryRequest
		wantErr := proto.Unmarshal(b, &want)
		got, err := decodeDelta(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decodeDelta: %v, protobuf: %v", err, wantErr)
		}
		if err == nil && !proto.Equal(got, &want) {
			t.Fatalf("decodeDelta %v\nprotobuf %v", got, &want)
		}
	})
}

// BenchmarkDecodeDelta decodes a reconnecting sidecar's EDS request with
// 1000 versions, as istiod does and with protobuf's decoder alone.
func BenchmarkDecodeDelta(b *testing.B) {
	raw, err := proto.Marshal(reconnectRequest(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decodeDelta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeDelta(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(raw, &discoveryv3.DeltaDiscoveryRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
