// Package xdsproxy is the agent's xDS proxy: the proxy (or a proxyless app)
// speaks ADS to a Unix socket, and each of its streams is carried to istiod
// on a stream of its own. The agent subscribes to the NameTable on Envoy's
// stream, as Istio's agent does, and hands it to the DNS proxy; it is never
// forwarded. Without Envoy the agent keeps a stream of its own for it.
package xdsproxy

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/grpcsock"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// NameTableType is the NDS type URL.
const NameTableType = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// Options configure the proxy.
type Options struct {
	// Upstream is the connection to istiod.
	Upstream *grpc.ClientConn
	// Node identifies the agent on its own NameTable stream.
	Node *corev3.Node
	// OnNameTable receives every NameTable istiod pushes (nil: NDS is not requested).
	OnNameTable func(*nds.NameTable)
	// OnClusters, when set, receives the names of every cluster istiod has
	// for this proxy (the DNS proxy's SRV answers take service ports from
	// them), whenever they change. They are read from the CDS responses
	// the xDS proxy carries to its downstream (Envoy's own subscription),
	// so istiod sends the clusters once per pod, not twice.
	OnClusters func(names []string)
	// NoEnvoy says no Envoy will connect (DISABLE_ENVOY, or proxyless
	// gRPC): the agent keeps its own stream for the NameTable, and asks for
	// CDS on it too. A proxyless app's streams never carry the NameTable.
	NoEnvoy bool
	// OwnStreamAfter is how long the NameTable waits for a downstream
	// stream to carry it before the agent opens its own (5 s): Envoy
	// connects within a second of starting, and a pod whose Envoy never
	// does still gets its DNS table.
	OwnStreamAfter time.Duration
	// MaxBackoff caps the wait between upstream reconnects (30 s).
	MaxBackoff time.Duration
}

// Proxy is the xDS proxy.
type Proxy struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	connected bool // an upstream stream is up
	tableSeen bool

	clusters clusterFeed
	carrier  *carrier
}

// New returns a proxy.
func New(opts Options, log *slog.Logger) *Proxy {
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.OwnStreamAfter <= 0 {
		opts.OwnStreamAfter = 5 * time.Second
	}
	return &Proxy{opts: opts, log: log.With("component", "xdsproxy"), clusters: newClusterFeed(), carrier: newCarrier()}
}

// Connected reports whether istiod is reachable (for readiness).
func (p *Proxy) Connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connected
}

func (p *Proxy) setConnected(v bool) {
	p.mu.Lock()
	p.connected = v
	p.mu.Unlock()
}

// Serve serves the proxy's streams on ln until ctx ends, and keeps the
// agent's NameTable subscription while it runs.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	g := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(g, p)
	if p.opts.OnNameTable != nil {
		go p.nameTables(ctx)
	}
	if p.watchesClusters() {
		go p.clusters.run(ctx, p.opts.OnClusters)
	}
	p.log.Info("serving xDS", "socket", ln.Addr().String())
	return grpcsock.Serve(ctx, g, ln)
}

// backoff returns the wait before reconnect attempt n: exponential from 100 ms, capped, with ±20% jitter.
func (p *Proxy) backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n, 10)
	d = min(d, p.opts.MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// StreamAggregatedResources carries one downstream SotW stream to istiod.
// When the upstream stream breaks, the downstream stays open (the proxy keeps
// its config) and the agent reconnects with backoff, replaying the
// downstream's current subscriptions on the new stream.
func (p *Proxy) StreamAggregatedResources(down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx := down.Context()
	nt := p.claim(new(carried))
	defer p.carrier.release(nt)
	q := newQueue[*discovery.DiscoveryRequest]()
	downErr := make(chan error, 1)
	var subsMu sync.Mutex
	subs := map[string]*discovery.DiscoveryRequest{} // latest request per type, for replay
	var node *corev3.Node
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				downErr <- err
				q.close()
				return
			}
			subsMu.Lock()
			if req.GetNode() != nil {
				node = req.GetNode()
			}
			subs[req.GetTypeUrl()] = req
			subsMu.Unlock()
			q.push(req)
		}
	}()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			wait := p.backoff(attempt - 1)
			p.log.Info("reconnecting to istiod", "in", wait.Round(time.Millisecond))
			select {
			case <-ctx.Done():
				return nil
			case err := <-downErr:
				return downstreamEnd(err)
			case <-time.After(wait):
			}
			// Replay the subscriptions as fresh requests on the new stream.
			subsMu.Lock()
			var replay []*discovery.DiscoveryRequest
			for _, r := range subs {
				r2 := proto.Clone(r).(*discovery.DiscoveryRequest)
				r2.ResponseNonce, r2.ErrorDetail, r2.Node = "", nil, nil
				if len(replay) == 0 {
					r2.Node = node // the first message of a stream carries the node
				}
				replay = append(replay, r2)
			}
			subsMu.Unlock()
			q.replace(replay)
		}
		err := p.pumpSotW(ctx, down, q, nt)
		if ctx.Err() != nil || q.closed() {
			select {
			case err := <-downErr:
				return downstreamEnd(err)
			default:
				return nil
			}
		}
		p.log.Warn("istiod stream ended", "err", err)
		if err == errHealthy {
			attempt = 0
		}
	}
}

// errHealthy marks an upstream that delivered responses before it broke, so
// the reconnect starts without backoff.
var errHealthy = errors.New("upstream stream ended after delivering responses")

// pumpSotW runs one upstream stream until it or the downstream ends. When
// the downstream carries the NameTable (nt), the agent asks for it after
// the stream's first request, and answers it, ACKs and all, itself.
func (p *Proxy) pumpSotW(ctx context.Context, down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer, q *queue[*discovery.DiscoveryRequest], nt *carried) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := discovery.NewAggregatedDiscoveryServiceClient(p.opts.Upstream).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	sendErr := make(chan error, 1)
	go func() {
		for first := true; ; first = false {
			req, ok := q.pop(ctx)
			if !ok {
				if q.closed() {
					cancel() // the downstream is gone: end the upstream stream too
				}
				sendErr <- nil
				return
			}
			err := up.Send(req)
			if err == nil && first && nt != nil {
				err = up.Send(&discovery.DiscoveryRequest{TypeUrl: NameTableType})
			}
			if err != nil {
				q.unpop(req)
				sendErr <- err
				return
			}
		}
	}()
	delivered := false
	for {
		resp, err := up.Recv()
		if err != nil {
			cancel()
			<-sendErr
			p.setConnected(false)
			if delivered {
				return errHealthy
			}
			return err
		}
		if !delivered {
			p.setConnected(true)
		}
		delivered = true
		if nt != nil && resp.GetTypeUrl() == NameTableType {
			ack := p.sotwTable(resp)
			if ack.ErrorDetail == nil {
				p.carrier.deliver(nt)
			}
			q.push(ack) // the sender's to send: a stream has one sender
			continue
		}
		if err := down.Send(resp); err != nil {
			return err
		}
		if resp.GetTypeUrl() == ClusterType && p.watchesClusters() {
			p.clusters.seen(sotwNames(resp))
		}
	}
}

func downstreamEnd(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}

// DeltaAggregatedResources carries one downstream delta stream to istiod.
// A delta client states what it has when it reconnects, so when the upstream
// breaks the downstream is ended with Unavailable and the client reconnects.
func (p *Proxy) DeltaAggregatedResources(down discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	nt := p.claim(new(carried))
	defer p.carrier.release(nt)
	up, err := discovery.NewAggregatedDiscoveryServiceClient(p.opts.Upstream).DeltaAggregatedResources(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "istiod: %v", err)
	}
	q := newQueue[*discovery.DeltaDiscoveryRequest]()
	errc := make(chan error, 3)
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				q.close()
				errc <- downstreamEnd(err)
				return
			}
			q.push(req)
		}
	}()
	go func() {
		for first := true; ; first = false {
			req, ok := q.pop(ctx)
			if !ok {
				return
			}
			err := up.Send(req)
			if err == nil && first && nt != nil {
				err = up.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: NameTableType})
			}
			if err != nil {
				errc <- status.Errorf(codes.Unavailable, "istiod: %v", err)
				return
			}
		}
	}()
	go func() {
		held := map[string]struct{}{} // the clusters this stream holds
		for {
			resp, err := up.Recv()
			if err != nil {
				p.setConnected(false)
				errc <- status.Errorf(codes.Unavailable, "istiod: %v", err)
				return
			}
			p.setConnected(true)
			if nt != nil && resp.GetTypeUrl() == NameTableType {
				ack := p.deltaTable(resp)
				if ack.ErrorDetail == nil {
					p.carrier.deliver(nt)
				}
				q.push(ack)
				continue
			}
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
			if resp.GetTypeUrl() == ClusterType && p.watchesClusters() {
				p.clusters.seen(deltaNames(held, resp))
			}
		}
	}()
	return <-errc
}
