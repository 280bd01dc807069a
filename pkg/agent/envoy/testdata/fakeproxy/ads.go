package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
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
	types := []string{cds, lds}
	ctx := context.Background()
	if b.DynamicResources.AdsConfig.APIType == "DELTA_GRPC" {
		c, err := xdstest.DialDelta(ctx, "unix:"+pipe, &node)
		if err != nil {
			return err
		}
		return c.AckAll(types, func(typeURL string) { record("ads delta %s", typeURL) })
	}
	c, err := xdstest.DialSotW(ctx, "unix:"+pipe, &node)
	if err != nil {
		return err
	}
	return c.AckAll(types, func(typeURL string) { record("ads %s", typeURL) })
}
