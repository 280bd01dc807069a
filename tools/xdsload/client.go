package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Type URLs the clients subscribe to, in push order; the NameTable only
// with --nds-on-ads (subscribed is how many of them a client asks for).
var types = []string{
	"type.googleapis.com/envoy.config.cluster.v3.Cluster",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
	"type.googleapis.com/envoy.config.listener.v3.Listener",
	"type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
	nameTableType,
}

const (
	cds = iota
	eds
	lds
	rds
	nds
)

// rawResponse is the envelope of a DiscoveryResponse or a
// DeltaDiscoveryResponse (version 1, type_url 4 and nonce 5 in both); the
// resources are skipped, not decoded, so the load generator stays cheap.
type rawResponse struct {
	version, typeURL, nonce string
	size                    int
	// track asks for the resources' names and versions (held) and the
	// removed names, for a delta client that reconnects with them.
	track   bool
	held    []heldResource
	removed []unique.Handle[string]
}

// client is one sidecar-like ADS stream.
type client struct {
	id         int
	delta      bool
	meta       bool   // the node carries an Istio agent's metadata
	apps       int    // with meta: the client is a replica of app svc-(id mod apps) (nodeMetadata)
	ns         string // the sidecar's namespace
	subscribed int    // how many of types it asks for
	stream     grpc.ClientStream
	open       func() (grpc.ClientStream, error) // a new stream, for retries
	// reopened counts the streams the control plane ended (opened again).
	reopened atomic.Int64
	// track: the client keeps what it holds (held) and brings it as
	// initial_resource_versions when it opens a stream again (--reconnects).
	track bool
	held  [5]map[unique.Handle[string]]unique.Handle[string]
	// endStream ends the current stream; restarting marks that end as the
	// client's own (restart), to open again at once.
	streamMu   sync.Mutex
	endStream  context.CancelFunc
	restarting atomic.Bool
	sendMu     sync.Mutex
	edsNames   []string
	// namesEnc[t] is names(t) encoded (encodeNames), for ACKs.
	namesEnc [5][]byte
	// recv[t] is when the latest response of type t arrived, acked[t]
	// when its ACK was sent (unix nanoseconds).
	recv, acked [5]atomic.Int64
	// typeBytes counts the response bytes received, by type (indexed as
	// types); ackBytes the request bytes of the ACKs sent.
	typeBytes [5]atomic.Int64
	ackBytes  atomic.Int64
}

var adsDesc = &grpc.StreamDesc{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true}

// newConn opens one gRPC connection to istiod; one or more clients' streams
// share it (--streams-per-conn).
func newConn(addr string, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20)),
		// Envoy's defaults: 256 MiB stream and connection windows, so the
		// client never throttles istiod.
		grpc.WithInitialWindowSize(256<<20), grpc.WithInitialConnWindowSize(256<<20))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// dial opens client id's stream; edsEnc is encodeNames(edsNames), shared by
// all clients.
func dial(ctx context.Context, conn *grpc.ClientConn, id int, ns string, edsNames []string, edsEnc []byte, delta, meta bool) (*client, error) {
	method := "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	if delta {
		method = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	}
	c := &client{id: id, ns: ns, delta: delta, meta: meta, edsNames: edsNames, subscribed: len(types) - 1}
	c.open = func() (grpc.ClientStream, error) {
		sctx, cancel := context.WithCancel(ctx)
		s, err := conn.NewStream(sctx, adsDesc, method)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("open stream: %w", err)
		}
		c.streamMu.Lock()
		if c.endStream != nil {
			c.endStream() // the stream it replaces has ended
		}
		c.endStream = cancel
		c.streamMu.Unlock()
		return s, nil
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	c.stream = s
	for t := range types {
		c.namesEnc[t] = encodeNames(c.names(t))
	}
	c.namesEnc[eds] = edsEnc
	return c, nil
}

// nodeID is client id's node: a sidecar in namespace ns.
func nodeID(id int, ns string) string {
	return fmt.Sprintf("sidecar~10.250.%d.%d~client-%d.%s~%s.svc.cluster.local", id/250, id%250+1, id, ns, ns)
}

func (c *client) names(t int) []string {
	switch t {
	case eds:
		return c.edsNames
	case rds:
		return []string{"8080"}
	}
	return nil
}

func (c *client) send(req any) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.SendMsg(req)
}

// serve runs the client's stream until ctx ends. A stream the control
// plane ends (Istio's request rate limit refuses with ResourceExhausted or
// closes it) is opened again after a jittered backoff from 500 ms to 30 s,
// as Envoy retries its ADS stream; reopened counts them. A client's own
// error (a response it cannot decode) ends it.
func (c *client) serve(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		err := c.run()
		if ctx.Err() != nil {
			return err
		}
		if !c.restarting.Swap(false) { // a restart (our own end) opens again at once
			if !streamEnded(err) {
				return err
			}
			c.reopened.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff/2 + rand.N(backoff/2)):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
		if c.stream, err = c.open(); err != nil {
			return err
		}
	}
}

// restart ends the client's stream; serve opens a new one at once, which
// brings what the client holds as initial_resource_versions, as Envoy's
// new stream does when its control plane restarts.
func (c *client) restart() {
	c.restarting.Store(true)
	c.streamMu.Lock()
	c.endStream()
	c.streamMu.Unlock()
}

// keep records what a tracked delta response of type t leaves the client
// holding.
func (c *client) keep(t int, r *rawResponse) {
	if c.held[t] == nil {
		c.held[t] = map[unique.Handle[string]]unique.Handle[string]{}
	}
	for _, h := range r.held {
		c.held[t][h.name] = h.version
	}
	for _, n := range r.removed {
		delete(c.held[t], n)
	}
}

// initialVersions is what the client holds of type t, as a request's
// initial_resource_versions.
func (c *client) initialVersions(t int) map[string]string {
	if len(c.held[t]) == 0 {
		return nil
	}
	m := make(map[string]string, len(c.held[t]))
	for n, v := range c.held[t] {
		m[n.Value()] = v.Value()
	}
	return m
}

// streamEnded reports whether err is the control plane ending the stream,
// not the client failing (gRPC reports a response the client's codec cannot
// decode as Internal).
func streamEnded(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && err != nil && s.Code() != codes.Internal
}

// run subscribes to CDS, EDS, LDS and RDS and ACKs every response until
// the stream ends.
func (c *client) run() error {
	node := &corev3.Node{Id: nodeID(c.id, c.ns)}
	if c.meta {
		node.Metadata = nodeMetadata(c.id, c.apps, c.ns)
	}
	for t, url := range types[:c.subscribed] {
		var req proto.Message
		if c.delta {
			d := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: url, ResourceNamesSubscribe: c.names(t),
				InitialResourceVersions: c.initialVersions(t)}
			if t == 0 {
				d.Node = node
			}
			req = d
		} else {
			r := &discoveryv3.DiscoveryRequest{TypeUrl: url, ResourceNames: c.names(t)}
			if t == 0 {
				r.Node = node
			}
			req = r
		}
		if err := c.send(req); err != nil {
			return err
		}
	}
	for {
		r := rawResponse{track: c.track}
		if err := c.stream.RecvMsg(&r); err != nil {
			return err
		}
		t := typeIndex(r.typeURL)
		if t < 0 {
			continue
		}
		if c.track {
			c.keep(t, &r)
		}
		b, err := c.ack(t, &r)
		if err != nil {
			return err
		}
		// Counted before the arrival is recorded, so a phase that ends on
		// it has counted it.
		c.typeBytes[t].Add(int64(r.size))
		c.ackBytes.Add(int64(len(b)))
		c.recv[t].Store(time.Now().UnixNano())
		if err := c.send(encoded(b)); err != nil {
			return err
		}
		c.acked[t].Store(time.Now().UnixNano())
	}
}

// ack encodes the ACK of r, a response of type t. A SotW ACK repeats every
// subscribed name (about 50 KiB for 1000 clusters); the names are encoded
// once per run and copied in, in field order as Envoy writes them.
func (c *client) ack(t int, r *rawResponse) ([]byte, error) {
	if c.delta {
		b, err := proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce})
		if err != nil {
			return nil, fmt.Errorf("marshal ACK: %w", err)
		}
		return b, nil
	}
	names := c.namesEnc[t]
	b := make([]byte, 0, len(names)+len(r.version)+len(r.typeURL)+len(r.nonce)+16)
	b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), r.version) // version_info
	b = append(b, names...)                                                               // resource_names (3)
	b = protowire.AppendString(protowire.AppendTag(b, 4, protowire.BytesType), r.typeURL) // type_url
	b = protowire.AppendString(protowire.AppendTag(b, 5, protowire.BytesType), r.nonce)   // response_nonce
	return b, nil
}

// encodeNames encodes names as DiscoveryRequest.resource_names fields.
func encodeNames(names []string) []byte {
	var b []byte
	for _, n := range names {
		b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), n)
	}
	return b
}

// received is the response bytes the client received, of every type.
func (c *client) received() int64 {
	var n int64
	for i := range c.typeBytes {
		n += c.typeBytes[i].Load()
	}
	return n
}

func typeIndex(url string) int {
	for i, t := range types {
		if t == url {
			return i
		}
	}
	return -1
}
