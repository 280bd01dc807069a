package main

import (
	"context"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// nameTableType is the NDS type URL.
const nameTableType = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// runAgentStream is the second stream Skiff's agent keeps beside Envoy's,
// on the same connection (--agent-streams): the NameTable alone, SotW,
// every response ACKed, until ctx ends. Istio's agent sends NDS on
// Envoy's stream instead, which the plain run models.
func runAgentStream(ctx context.Context, conn *grpc.ClientConn, id int, ns string) error {
	s, err := conn.NewStream(ctx, adsDesc, "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources")
	if err != nil {
		return fmt.Errorf("open agent stream: %w", err)
	}
	node := &corev3.Node{Id: nodeID(id, ns)}
	if err := s.SendMsg(&discoveryv3.DiscoveryRequest{TypeUrl: nameTableType, Node: node}); err != nil {
		return err
	}
	for {
		var r rawResponse
		if err := s.RecvMsg(&r); err != nil {
			return err
		}
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: nameTableType, VersionInfo: r.version, ResponseNonce: r.nonce}
		if err := s.SendMsg(ack); err != nil {
			return err
		}
	}
}
