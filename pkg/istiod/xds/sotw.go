package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// sotwStream is a state-of-the-world stream with the codec's types.
type sotwStream = grpc.ServerStream

// streamSotW serves one state-of-the-world ADS stream: this goroutine
// reads and handles requests, pushes run on their own (pushq.go).
func (s *Server) streamSotW(stream sotwStream) error {
	ctx := stream.Context()
	var c *Connection
	defer func() {
		if c != nil {
			c.close()
			s.removeConn(c)
		}
	}()
	var node *debugNode
	debugSent := map[string]bool{}
	for {
		req := &rawRequest{}
		if err := stream.RecvMsg(req); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		// The handler goroutine waits: each request is decoded and
		// handled aside.
		err := aside(func() error {
			defer req.free()
			if err := req.decode(req.buf.ReadOnlyData()); err != nil {
				return status.Error(codes.Internal, err.Error())
			}
			if node == nil && req.req.GetNode() != nil {
				node = debugNodeOf(req.req.GetNode())
			}
			if isDebugType(req.req.GetTypeUrl()) {
				// Debug streams (istioctl's) are not proxies: they are
				// answered without a connection (and a proxy's stream
				// sends nothing else meanwhile).
				return c.whole(func() error { return s.answerDebug(stream, node, &req.req, req.Names(&s.names), debugSent) })
			}
			if c == nil {
				var err error
				if c, err = s.initConnection(ctx, req.req.GetNode().GetId(), req.req.GetNode().GetMetadata(), false, stream); err != nil {
					return err
				}
			}
			return c.whole(func() error { return c.handleSotW(stream, req) })
		})
		if err != nil {
			return err
		}
	}
}

// initConnection parses the node of a stream's first request and registers
// the connection once a push context exists.
func (s *Server) initConnection(ctx context.Context, id string, meta *structpb.Struct, delta bool, stream grpc.ServerStream) (*Connection, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "first request has no node id")
	}
	p, err := model.ParseProxy(id, meta)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.checkNode(ctx, p, meta); err != nil {
		return nil, err
	}
	if _, err := s.waitPushContext(ctx); err != nil {
		return nil, err
	}
	c := s.newConnection(p, meta, delta)
	c.start(stream)
	s.addConn(c)
	return c, nil
}

// handleSotW applies one request: first subscription, stale nonce, NACK,
// ACK, or a change of subscribed names.
func (c *Connection) handleSotW(stream sotwStream, raw *rawRequest) error {
	req := &raw.req
	typ := req.GetTypeUrl()
	label := typeLabel(typ)
	c.server.log.Debug("request", "proxy", c.proxy.ID, "type", label, "nonce", req.GetResponseNonce(), "nack", req.GetErrorDetail() != nil)
	c.mu.Lock()
	w := c.watched[typ]
	if w == nil || w.nonceSent == "" || req.GetResponseNonce() == "" {
		// A new subscription, or a client that reconnected and still
		// carries the nonce of its previous stream: answer it.
		first := w == nil
		if first {
			w = &watch{typeURL: typ}
			c.watched[typ] = w
		}
		names := raw.Names(&c.server.names)
		w.wildcard = c.isWildcard(typ, names)
		w.names = c.server.nameLists.share(sortedNames(names))
		w.namesHash = raw.namesHash
		w.lastHash, w.sent = "", nil
		c.mu.Unlock()
		if err := c.sendType(stream, c.server.PushContext(), w, nil, true); err != nil {
			return err
		}
		if first {
			c.server.answeredFirst()
		}
		return nil
	}
	if req.GetResponseNonce() != w.nonceSent {
		c.mu.Unlock()
		c.server.metrics.Expired(label)
		c.server.log.Debug("ignoring stale nonce", "proxy", c.proxy.ID, "type", label, "nonce", req.GetResponseNonce(), "sent", w.nonceSent)
		return nil
	}
	if d := req.GetErrorDetail(); d != nil {
		w.nackNonce, w.nackMessage = req.GetResponseNonce(), d.GetMessage()
		c.mu.Unlock()
		c.server.metrics.Reject(label)
		c.server.log.Warn("config rejected by proxy", "proxy", c.proxy.ID, "type", label, "version", w.versionSent, "err", d.GetMessage())
		return nil
	}
	w.nonceAcked, w.versionAcked = req.GetResponseNonce(), w.versionSent
	if w.wildcard || raw.namesHash == w.namesHash {
		c.mu.Unlock()
		return nil // the usual ACK: names unchanged, nothing decoded
	}
	w.namesHash = raw.namesHash
	names := sortedNames(raw.Names(&c.server.names))
	if slices.Equal(names, w.names) {
		c.mu.Unlock()
		return nil
	}
	w.names = c.server.nameLists.share(names)
	w.lastHash, w.sent = "", nil
	c.mu.Unlock()
	if len(names) == 0 && !gen.IsWildcard(typ) {
		return nil // unsubscribed
	}
	return c.sendType(stream, c.server.PushContext(), w, nil, true)
}

// pushSotW pushes one (merged) event: every changed type in push order, or
// for an endpoint-only event the types built from the changed endpoints
// (EDS for the changed hosts only).
func (c *Connection) pushSotW(stream sotwStream, ev *pushEvent) error {
	var sc *scopeChange
	if !ev.full {
		sc = ev.forScope(c.proxy)
	}
	for i, typ := range gen.PushOrder() {
		c.mu.Lock()
		w := c.watched[typ]
		c.mu.Unlock()
		if w == nil || (!w.wildcard && len(w.names) == 0) {
			continue
		}
		if !ev.full && !sc.reads[i] {
			continue
		}
		if err := c.sendType(stream, ev.pc, w, ev, false); err != nil {
			return err
		}
	}
	c.server.observeConvergence(ev.start)
	ev.finish()
	return nil
}

// sendType generates and sends one type. CDS, LDS and NDS go out whole,
// unless force is false and the set equals the last one sent. EDS and RDS
// may go out in part (SotW allows it for them): with force everything
// subscribed, otherwise only what differs from what the client holds; with
// an endpoint-only event only the changed hosts' load assignments are even
// generated.
func (c *Connection) sendType(stream sotwStream, pc *model.PushContext, w *watch, ev *pushEvent, force bool) error {
	c.mu.Lock()
	names := w.names
	if w.wildcard {
		names = nil
	}
	c.mu.Unlock()
	partial := ev != nil && !ev.full && w.typeURL == gen.EndpointType
	if partial {
		names = c.changedClusters(ev, names)
		if len(names) == 0 {
			return nil
		}
	}
	rs, ok := c.generate(pc, w, names)
	if !ok {
		return nil // nothing sent: the client keeps what it holds
	}
	send := rs
	incremental := w.typeURL == gen.EndpointType || w.typeURL == gen.RouteType
	c.mu.Lock()
	switch {
	case incremental && !force:
		send = changed(w.sent, rs)
		if len(send) == 0 {
			c.mu.Unlock()
			return nil
		}
		if partial {
			w.sent = c.server.overlays.overlay(w.sent, rs)
		} else {
			w.sent = c.server.lists.share(rs)
		}
	case incremental:
		w.sent = c.server.lists.share(rs)
	default:
		hash := setHash(rs)
		if hash == w.lastHash && !force {
			c.mu.Unlock()
			return nil
		}
		w.lastHash = hash
	}
	nonce := c.nextNonce()
	w.nonceSent, w.versionSent, w.sentAt = nonce, pc.Version, time.Now()
	c.mu.Unlock()
	resp := &sotwResponse{version: pc.Version, resources: send, typeURL: w.typeURL, nonce: nonce,
		body: c.server.bodies.get(w.typeURL, false, send)}
	if err := stream.SendMsg(resp); err != nil {
		return fmt.Errorf("send %s to %s: %w", typeLabel(w.typeURL), c.proxy.ID, err)
	}
	c.server.metrics.Push(typeLabel(w.typeURL))
	c.server.log.Debug("sent", "proxy", c.proxy.ID, "type", typeLabel(w.typeURL), "resources", len(send), "nonce", nonce, "partial", partial)
	return nil
}

// changedClusters returns the subscribed cluster names of the event's
// changed hosts (subscribed nil: wildcard).
func (c *Connection) changedClusters(ev *pushEvent, subscribed []string) []string {
	all := ev.forScope(c.proxy).clusters
	if subscribed == nil {
		return all
	}
	var out []string
	for _, n := range all {
		if _, ok := slices.BinarySearch(subscribed, n); ok {
			out = append(out, n)
		}
	}
	return out
}

func (s *Server) observeConvergence(start time.Time) {
	if s.metrics != nil {
		s.metrics.Convergence.Observe(time.Since(start).Seconds())
	}
}
