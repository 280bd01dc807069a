// Package xdsproxy is the agent's xDS proxy: the proxy (or a proxyless app)
// speaks ADS to a Unix socket, and each of its streams is carried to istiod
// on a stream of its own. The agent subscribes to the NameTable on Envoy's
// stream, as Istio's agent does, and hands it to the DNS proxy; it is never
// forwarded. Without Envoy the agent keeps a stream of its own for it.
package xdsproxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// NameTableType is the NDS type URL.
const NameTableType = nds.TypeURL

// The ADS methods, as Envoy and gRPC clients call them.
const (
	sotwMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)

// Field numbers the proxy reads or rewrites in messages it otherwise
// carries byte for byte (envoy.service.discovery.v3).
const (
	reqNode, reqTypeURL, reqNonce, reqErrorDetail = 2, 4, 5, 6 // DiscoveryRequest
	respTypeURL                                   = 4          // DiscoveryResponse and DeltaDiscoveryResponse
)

// Options configure the proxy.
type Options struct {
	// Upstream is the connection to istiod.
	Upstream *grpcwire.Conn
	// Node is the encoded node (envoy.config.core.v3.Node) of the agent's
	// own NameTable stream.
	Node []byte
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
	s := grpcwire.NewServer(p.log)
	s.Handle(sotwMethod, p.sotw)
	s.Handle(deltaMethod, p.delta)
	if p.opts.OnNameTable != nil {
		go p.nameTables(ctx)
	}
	if p.watchesClusters() {
		go p.clusters.run(ctx, p.opts.OnClusters)
	}
	p.log.Info("serving xDS", "socket", ln.Addr().String())
	return s.Serve(ctx, ln)
}

// backoff returns the wait before reconnect attempt n: exponential from 100 ms, capped, with ±20% jitter.
func (p *Proxy) backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n, 10)
	d = min(d, p.opts.MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// sotw carries one downstream state-of-the-world stream to istiod. When
// the upstream stream breaks, the downstream stays open (the proxy keeps
// its config) and the agent reconnects with backoff, replaying the
// downstream's current subscriptions on the new stream. Requests and
// responses are carried as they were encoded; only their type, node and
// nonce are read.
func (p *Proxy) sotw(down grpcwire.ServerStream) error {
	ctx := down.Context()
	nt := p.claim(new(carried))
	defer p.carrier.release(nt)
	q := newQueue[[]byte]()
	downErr := make(chan error, 1)
	var subsMu sync.Mutex
	subs := map[string][]byte{} // latest request per type, for replay
	var node []byte
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				downErr <- err
				q.close()
				return
			}
			typeURL, _, _ := xdswire.FieldString(req, reqTypeURL)
			n, hasNode, _ := xdswire.FieldString(req, reqNode)
			subsMu.Lock()
			if hasNode {
				node = []byte(n)
			}
			subs[typeURL] = req
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
			subsMu.Lock()
			q.replace(replay(subs, node))
			subsMu.Unlock()
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

// replay is the downstream's subscriptions as fresh requests for a new
// upstream stream: without nonce, error detail or node, but for the node
// on the first (a stream's first message names the node).
func replay(subs map[string][]byte, node []byte) [][]byte {
	out := make([][]byte, 0, len(subs))
	for _, r := range subs {
		r = xdswire.StripFields(r, reqNode, reqNonce, reqErrorDetail)
		if len(out) == 0 && node != nil {
			r = xdswire.PrependField(r, reqNode, node)
		}
		out = append(out, r)
	}
	return out
}

// errHealthy marks an upstream that delivered responses before it broke, so
// the reconnect starts without backoff.
var errHealthy = errors.New("upstream stream ended after delivering responses")

// pumpSotW runs one upstream stream until it or the downstream ends. When
// the downstream carries the NameTable (nt), the agent asks for it after
// the stream's first request, and answers it, ACKs and all, itself.
func (p *Proxy) pumpSotW(ctx context.Context, down grpcwire.ServerStream, q *queue[[]byte], nt *carried) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := p.opts.Upstream.NewStream(ctx, sotwMethod)
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
				err = up.Send((&xdswire.DiscoveryRequest{TypeURL: NameTableType}).Marshal())
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
		typeURL, _, _ := xdswire.FieldString(resp, respTypeURL)
		if nt != nil && typeURL == NameTableType {
			ack := p.sotwTable(resp)
			if ack.ErrorDetail == nil {
				p.carrier.deliver(nt)
			}
			q.push(ack.Marshal()) // the sender's to send: a stream has one sender
			continue
		}
		if err := down.Send(resp); err != nil {
			return err
		}
		if typeURL == ClusterType && p.watchesClusters() {
			if names, err := sotwNames(resp); err == nil {
				p.clusters.seen(names)
			}
		}
	}
}

func downstreamEnd(err error) error {
	if err == nil || errors.Is(err, io.EOF) || grpcwire.CodeOf(err) == grpcwire.Canceled {
		return nil
	}
	return err
}

// delta carries one downstream delta stream to istiod. A delta client
// states what it has when it reconnects, so when the upstream breaks the
// downstream is ended with Unavailable and the client reconnects.
func (p *Proxy) delta(down grpcwire.ServerStream) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	nt := p.claim(new(carried))
	defer p.carrier.release(nt)
	up, err := p.opts.Upstream.NewStream(ctx, deltaMethod)
	if err != nil {
		return grpcwire.Errorf(grpcwire.Unavailable, "istiod: %v", err)
	}
	q := newQueue[[]byte]()
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
				err = up.Send((&xdswire.DeltaDiscoveryRequest{TypeURL: NameTableType}).Marshal())
			}
			if err != nil {
				errc <- grpcwire.Errorf(grpcwire.Unavailable, "istiod: %v", err)
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
				errc <- grpcwire.Errorf(grpcwire.Unavailable, "istiod: %v", err)
				return
			}
			p.setConnected(true)
			typeURL, _, _ := xdswire.FieldString(resp, respTypeURL)
			if nt != nil && typeURL == NameTableType {
				ack := p.deltaTable(resp)
				if ack.ErrorDetail == nil {
					p.carrier.deliver(nt)
				}
				q.push(ack.Marshal())
				continue
			}
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
			if typeURL == ClusterType && p.watchesClusters() {
				if names, err := deltaNames(held, resp); err == nil {
					p.clusters.seen(names)
				}
			}
		}
	}()
	return <-errc
}
