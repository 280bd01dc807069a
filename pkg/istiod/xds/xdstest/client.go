package xdstest

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrTimeout is returned by Recv when nothing arrived in time.
var ErrTimeout = errors.New("no response in time")

// Node builds an xDS node with string metadata.
func Node(id string, meta map[string]string) *corev3.Node {
	fields := map[string]any{}
	for k, v := range meta {
		fields[k] = v
	}
	s, _ := structpb.NewStruct(fields)
	return &corev3.Node{Id: id, Metadata: s}
}

// SotW is a state-of-the-world ADS client that shows every message.
type SotW struct {
	conn   *grpc.ClientConn
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
	sent   bool
	resps  chan *discoveryv3.DiscoveryResponse
	errc   chan error
}

// DialSotW opens an ADS stream to addr as node.
func DialSotW(ctx context.Context, addr string, node *corev3.Node) (*SotW, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open ADS stream: %w", err)
	}
	c := &SotW{conn: conn, stream: stream, node: node, resps: make(chan *discoveryv3.DiscoveryResponse, 100), errc: make(chan error, 1)}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.errc <- err
				close(c.resps)
				return
			}
			c.resps <- r
		}
	}()
	return c, nil
}

// Close ends the stream and the connection.
func (c *SotW) Close() {
	c.stream.CloseSend()
	c.conn.Close()
	for range c.resps {
	}
}

// Request sends a request; the node goes with the first one only.
func (c *SotW) Request(typeURL string, names []string, version, nonce string, nack error) error {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, VersionInfo: version, ResponseNonce: nonce}
	if !c.sent {
		req.Node, c.sent = c.node, true
	}
	if nack != nil {
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: nack.Error()}
	}
	return c.stream.Send(req)
}

// Ack acknowledges r, keeping names subscribed.
func (c *SotW) Ack(r *discoveryv3.DiscoveryResponse, names []string) error {
	return c.Request(r.GetTypeUrl(), names, r.GetVersionInfo(), r.GetNonce(), nil)
}

// Subscribe requests a type, waits up to d for the first response and
// acknowledges it, as a proxy does when it connects.
func (c *SotW) Subscribe(typeURL string, names []string, d time.Duration) error {
	if err := c.Request(typeURL, names, "", "", nil); err != nil {
		return err
	}
	r, err := c.Recv(d)
	if err != nil {
		return fmt.Errorf("%s: %w", typeURL, err)
	}
	return c.Ack(r, names)
}

// Nack rejects r with reason.
func (c *SotW) Nack(r *discoveryv3.DiscoveryResponse, names []string, reason error) error {
	return c.Request(r.GetTypeUrl(), names, "", r.GetNonce(), reason)
}

// Recv waits up to d for the next response.
func (c *SotW) Recv(d time.Duration) (*discoveryv3.DiscoveryResponse, error) {
	select {
	case r, ok := <-c.resps:
		if !ok {
			return nil, <-c.errc
		}
		return r, nil
	case <-time.After(d):
		return nil, ErrTimeout
	}
}

// Delta is a delta ADS client that shows every message.
type Delta struct {
	conn   *grpc.ClientConn
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	sent   bool
	resps  chan *discoveryv3.DeltaDiscoveryResponse
	errc   chan error
}

// DialDelta opens a delta ADS stream to addr as node.
func DialDelta(ctx context.Context, addr string, node *corev3.Node) (*Delta, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open delta ADS stream: %w", err)
	}
	c := &Delta{conn: conn, stream: stream, node: node, resps: make(chan *discoveryv3.DeltaDiscoveryResponse, 100), errc: make(chan error, 1)}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.errc <- err
				close(c.resps)
				return
			}
			c.resps <- r
		}
	}()
	return c, nil
}

// Close ends the stream and the connection.
func (c *Delta) Close() {
	c.stream.CloseSend()
	c.conn.Close()
	for range c.resps {
	}
}

// Send sends req, adding the node to the first request.
func (c *Delta) Send(req *discoveryv3.DeltaDiscoveryRequest) error {
	if !c.sent {
		req.Node, c.sent = c.node, true
	}
	return c.stream.Send(req)
}

// Ack acknowledges r.
func (c *Delta) Ack(r *discoveryv3.DeltaDiscoveryResponse) error {
	return c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

// Nack rejects r with reason.
func (c *Delta) Nack(r *discoveryv3.DeltaDiscoveryResponse, reason error) error {
	return c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: reason.Error()}})
}

// Recv waits up to d for the next response.
func (c *Delta) Recv(d time.Duration) (*discoveryv3.DeltaDiscoveryResponse, error) {
	select {
	case r, ok := <-c.resps:
		if !ok {
			return nil, <-c.errc
		}
		return r, nil
	case <-time.After(d):
		return nil, ErrTimeout
	}
}

// AckAll asks for typeURLs, then ACKs every response as it comes, as Envoy
// does, calling saw with each response's type, until the stream ends; it
// returns the error the stream ended with.
func (c *SotW) AckAll(typeURLs []string, saw func(typeURL string)) error {
	for _, u := range typeURLs {
		if err := c.Request(u, nil, "", "", nil); err != nil {
			return err
		}
	}
	for r := range c.resps {
		saw(r.GetTypeUrl())
		if err := c.Ack(r, nil); err != nil {
			return err
		}
	}
	return <-c.errc
}

// AckAll is SotW.AckAll on a delta stream.
func (c *Delta) AckAll(typeURLs []string, saw func(typeURL string)) error {
	for _, u := range typeURLs {
		if err := c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: u}); err != nil {
			return err
		}
	}
	for r := range c.resps {
		saw(r.GetTypeUrl())
		if err := c.Ack(r); err != nil {
			return err
		}
	}
	return <-c.errc
}
