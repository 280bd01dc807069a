package main

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"unique"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestAck checks the hand-assembled SotW ACK is the standard encoding.
func TestAck(t *testing.T) {
	names := []string{spread(1).cluster(0), spread(1).cluster(1)}
	c := &client{edsNames: names}
	c.namesEnc[eds] = encodeNames(names)
	r := &rawResponse{version: "v7", typeURL: types[eds], nonce: "conn-1/42"}
	got, err := c.ack(eds, r)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.Marshal(&discoveryv3.DiscoveryRequest{VersionInfo: r.version, ResourceNames: names, TypeUrl: r.typeURL, ResponseNonce: r.nonce})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("ACK %x\nwant %x", got, want)
	}
}

// TestScanResponse checks the envelope read across frames, whatever the
// frame boundaries.
func TestScanResponse(t *testing.T) {
	resp := &discoveryv3.DiscoveryResponse{VersionInfo: "v3", TypeUrl: types[cds], Nonce: "c-1/9"}
	for i := range 5 {
		resp.Resources = append(resp.Resources, &anypb.Any{TypeUrl: "t", Value: bytes.Repeat([]byte{byte(i)}, 300)})
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, frame := range []int{1, 7, 16, 1000, len(b)} {
		var data mem.BufferSlice
		for rest := b; len(rest) > 0; {
			n := min(frame, len(rest))
			data = append(data, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		var got rawResponse
		if err := (rawCodec{}).Unmarshal(data, &got); err != nil {
			t.Fatalf("frames of %d: %v", frame, err)
		}
		if got.version != "v3" || got.typeURL != types[cds] || got.nonce != "c-1/9" || got.size != len(b) || got.held != nil {
			t.Errorf("frames of %d: %+v", frame, got)
		}
	}
	if err := (rawCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-3])}, &rawResponse{}); err == nil {
		t.Error("a truncated response scanned without error")
	}
}

// TestScanDeltaHeld checks that a tracked delta response yields each
// resource's name and version and the removed names, whatever the frame
// boundaries, and that keep and initialVersions turn them into what the
// client brings to its next stream.
func TestScanDeltaHeld(t *testing.T) {
	resp := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "s1", TypeUrl: types[cds], Nonce: "n-1",
		RemovedResources: []string{"gone"}}
	for i := range 3 {
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: spread(1).cluster(i), Version: fmt.Sprint("v", i),
			Resource: &anypb.Any{TypeUrl: "t", Value: bytes.Repeat([]byte{byte(i)}, 300)}})
	}
	// A resource without a version (the field is optional on the wire).
	resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: "no-version"})
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, frame := range []int{1, 7, 300, len(b)} {
		var data mem.BufferSlice
		for rest := b; len(rest) > 0; {
			n := min(frame, len(rest))
			data = append(data, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		got := rawResponse{track: true}
		if err := (rawCodec{}).Unmarshal(data, &got); err != nil {
			t.Fatalf("frames of %d: %v", frame, err)
		}
		if got.nonce != "n-1" || got.typeURL != types[cds] || len(got.removed) != 1 || got.removed[0].Value() != "gone" {
			t.Fatalf("frames of %d: %+v", frame, got)
		}
		c := &client{held: [5]map[unique.Handle[string]]unique.Handle[string]{cds: {unique.Make("gone"): unique.Make("v9")}}}
		c.keep(cds, &got)
		want := map[string]string{spread(1).cluster(0): "v0", spread(1).cluster(1): "v1", spread(1).cluster(2): "v2", "no-version": ""}
		if iv := c.initialVersions(cds); !maps.Equal(iv, want) {
			t.Errorf("frames of %d: initial versions %v, want %v", frame, iv, want)
		}
	}
	if err := (rawCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-3])}, &rawResponse{track: true}); err == nil {
		t.Error("a truncated response scanned without error")
	}
}
