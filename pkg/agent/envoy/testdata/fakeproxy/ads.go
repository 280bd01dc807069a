package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

const (
	cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
)

// bootstrap is what the ADS stand-in reads of Envoy's bootstrap: the node,
// and the clusters, for the xds-grpc cluster's pipe.
type bootstrap struct {
	Node             json.RawMessage `json:"node"`
	DynamicResources struct {
		AdsConfig struct {
			APIType string `json:"api_type"`
		} `json:"ads_config"`
	} `json:"dynamic_resources"`
	StaticResources struct {
		Clusters []struct {
			Name           string `json:"name"`
			LoadAssignment struct {
				Endpoints []struct {
					LbEndpoints []struct {
						Endpoint struct {
							Address struct {
								Pipe struct {
									Path string `json:"path"`
								} `json:"pipe"`
							} `json:"address"`
						} `json:"endpoint"`
					} `json:"lb_endpoints"`
				} `json:"endpoints"`
			} `json:"load_assignment"`
		} `json:"clusters"`
	} `json:"static_resources"`
}

// ads does what Envoy does on its ADS stream, as far as a control plane
// sees: it connects to the bootstrap's xds-grpc pipe with the bootstrap's
// node, on a delta stream if the bootstrap says DELTA_GRPC, asks for
// clusters and listeners, and ACKs every response, recording "ads TYPE"
// (state of the world) or "ads delta TYPE" for each.
func ads(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var b bootstrap
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	var node corev3.Node
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b.Node, &node); err != nil {
		return fmt.Errorf("bootstrap node: %w", err)
	}
	pipe := ""
	for _, c := range b.StaticResources.Clusters {
		if c.Name == "xds-grpc" && len(c.LoadAssignment.Endpoints) > 0 && len(c.LoadAssignment.Endpoints[0].LbEndpoints) > 0 {
			pipe = c.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.Pipe.Path
		}
	}
	if pipe == "" {
		return fmt.Errorf("bootstrap has no xds-grpc pipe")
	}
	conn, err := grpc.NewClient("unix:"+pipe, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := discovery.NewAggregatedDiscoveryServiceClient(conn)
	if b.DynamicResources.AdsConfig.APIType == "DELTA_GRPC" {
		return delta(c, &node)
	}
	s, err := c.StreamAggregatedResources(context.Background(), grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: &node, TypeUrl: cds}); err != nil {
		return err
	}
	if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: lds}); err != nil {
		return err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		record("ads %s", resp.GetTypeUrl())
		if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
	}
}

// delta is ads on a delta stream, recording "ads delta TYPE".
func delta(c discovery.AggregatedDiscoveryServiceClient, node *corev3.Node) error {
	s, err := c.DeltaAggregatedResources(context.Background(), grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: cds}); err != nil {
		return err
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: lds}); err != nil {
		return err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		record("ads delta %s", resp.GetTypeUrl())
		if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
	}
}
