package main

import (
	"bytes"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestAck checks the hand-assembled SotW ACK is the standard encoding.
func TestAck(t *testing.T) {
	names := []string{clusterName(0), clusterName(1)}
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
		want := rawResponse{version: "v3", typeURL: types[cds], nonce: "c-1/9", size: len(b)}
		if got != want {
			t.Errorf("frames of %d: %+v, want %+v", frame, got, want)
		}
	}
	if err := (rawCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-3])}, &rawResponse{}); err == nil {
		t.Error("a truncated response scanned without error")
	}
}
