package xds

import (
	"fmt"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestDecodeFrames checks a request split over frames of any size decodes
// as the same request read from one buffer: fields, names and names hash.
func TestDecodeFrames(t *testing.T) {
	var names []string
	for i := range 2000 {
		names = append(names, fmt.Sprintf("outbound|8080||svc-%04d.bench.svc.cluster.local", i))
	}
	reqs := map[string]*discoveryv3.DiscoveryRequest{
		"ack": {TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", VersionInfo: "v7",
			ResponseNonce: "proxy-1/9", ResourceNames: names},
		"first with node": {TypeUrl: "t", Node: &corev3.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local"}, ResourceNames: names[:3]},
		"nack, no names":  {TypeUrl: "t", ResponseNonce: "n", ErrorDetail: &status.Status{Code: 3, Message: "bad"}},
	}
	for name, req := range reqs {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var want rawRequest
		if err := want.decode(b); err != nil {
			t.Fatal(err)
		}
		for _, frame := range []int{1, 7, 1000, 16384, len(b)} {
			t.Run(fmt.Sprintf("%s/%d", name, frame), func(t *testing.T) {
				var data mem.BufferSlice
				for rest := b; len(rest) > 0; {
					k := min(frame, len(rest))
					data = append(data, mem.SliceBuffer(slices.Clone(rest[:k])))
					rest = rest[k:]
				}
				var got rawRequest
				if err := (codec{}).Unmarshal(data, &got); err != nil {
					t.Fatal(err)
				}
				defer got.free()
				if !proto.Equal(&got.req, &want.req) {
					t.Errorf("request: got %v, want %v", &got.req, &want.req)
				}
				if got.namesHash != want.namesHash || got.hasNames != want.hasNames {
					t.Errorf("names hash %x (has %t), want %x (%t)", got.namesHash, got.hasNames, want.namesHash, want.hasNames)
				}
				var in interner
				if g := got.Names(&in); !slices.Equal(g, req.ResourceNames) {
					t.Errorf("names: got %d, want %d", len(g), len(req.ResourceNames))
				}
			})
		}
	}
}

// TestDecodeFramesTruncated checks a cut message is an error, not a panic.
func TestDecodeFramesTruncated(t *testing.T) {
	b, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: "t", ResourceNames: []string{"aaaa", "bbbb"}})
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(b); cut++ {
		data := mem.BufferSlice{mem.SliceBuffer(b[:cut/2]), mem.SliceBuffer(b[cut/2 : cut])}
		var r rawRequest
		if err := r.decodeSlice(data); err == nil && cut < len(b) {
			// A cut at a field boundary is a valid shorter message.
			if !validMessage(b[:cut]) {
				t.Errorf("cut at %d: no error", cut)
			}
		}
		r.free()
	}
}

// validMessage reports whether b is a sequence of whole fields.
func validMessage(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return true
}
