package main

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
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
