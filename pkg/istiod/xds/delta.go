package xds

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// deltaStream carries DeltaDiscoveryRequest and DeltaDiscoveryResponse.
type deltaStream = grpc.ServerStream

// streamDelta serves one delta (incremental) ADS stream: this goroutine
// reads and handles requests, pushes run on their own (pushq.go).
func (s *Server) streamDelta(stream deltaStream) error {
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
		raw := &rawDelta{}
		if err := stream.RecvMsg(raw); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		// The handler goroutine waits: each request is decoded and
		// handled aside.
		err := aside(func() error {
			req, err := raw.decode()
			if err != nil {
				return err
			}
			if node == nil && req.GetNode() != nil {
				node = debugNodeOf(req.GetNode())
			}
			if isDebugType(req.GetTypeUrl()) {
				return c.whole(func() error { return s.answerDebugDelta(stream, node, req, debugSent) })
			}
			if c == nil {
				if c, err = s.initConnection(ctx, req.GetNode().GetId(), req.GetNode().GetMetadata(), true, stream); err != nil {
					return err
				}
			}
			return c.whole(func() error { return c.handleDelta(stream, req) })
		})
		if err != nil {
			return err
		}
	}
}

// handleDelta applies one delta request. Subscription changes always apply;
// ACK and NACK only when the nonce is the last one sent.
func (c *Connection) handleDelta(stream deltaStream, req *discoveryv3.DeltaDiscoveryRequest) error {
	typ := req.GetTypeUrl()
	label := typeLabel(typ)
	c.mu.Lock()
	w := c.watched[typ]
	first := w == nil
	if first {
		w = &watch{typeURL: typ}
		w.wildcard = c.isWildcard(typ, req.GetResourceNamesSubscribe())
		if iv := req.GetInitialResourceVersions(); len(iv) > 0 {
			// The request's own map: nothing else keeps the request. nil
			// otherwise: most streams start with nothing.
			w.initial = iv
		}
		c.watched[typ] = w
	}
	if n := req.GetResponseNonce(); n != "" && !first {
		switch {
		case n != w.nonceSent:
			c.server.metrics.Expired(label)
		case req.GetErrorDetail() != nil:
			w.nackNonce, w.nackMessage = n, req.GetErrorDetail().GetMessage()
			c.server.metrics.Reject(label)
			c.server.log.Warn("config rejected by proxy", "proxy", c.proxy.ID, "type", label, "err", w.nackMessage)
		default:
			w.nonceAcked, w.versionAcked = n, w.versionSent
		}
	}
	var added []string
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == "*" {
			w.wildcard = true
			continue
		}
		if _, ok := slices.BinarySearch(w.names, n); !ok {
			added = append(added, c.server.names.internString(n))
		}
	}
	// w.names is copied on write: pushes read it without a copy.
	if len(added) > 0 {
		names := append(slices.Clip(slices.Clone(w.names)), added...)
		slices.Sort(names)
		w.names = c.server.nameLists.share(slices.Compact(names))
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == "*" {
			w.wildcard = false
			continue
		}
		if i, ok := slices.BinarySearch(w.names, n); ok {
			w.names = slices.Delete(slices.Clone(w.names), i, i+1)
		}
		w.settleInitial(nil, []string{n})
		// held may share its array with generated lists: never edit in place.
		w.held = slices.DeleteFunc(slices.Clone(w.held), func(r *gen.Resource) bool { return r.Name == n })
	}
	c.mu.Unlock()
	if first || len(added) > 0 {
		if err := c.sendDelta(stream, c.server.PushContext(), w, nil, first); err != nil {
			return err
		}
		if first {
			c.server.answeredFirst()
		}
	}
	return nil
}

func (c *Connection) pushDelta(stream deltaStream, ev *pushEvent) error {
	var sc *scopeChange
	if !ev.full {
		sc = ev.forScope(c.proxy)
	}
	for i, typ := range gen.PushOrder() {
		c.mu.Lock()
		w := c.watched[typ]
		c.mu.Unlock()
		if w == nil || (!ev.full && !sc.reads[i]) {
			continue
		}
		if err := c.sendDelta(stream, ev.pc, w, ev, false); err != nil {
			return err
		}
	}
	c.server.observeConvergence(ev.start)
	ev.finish()
	return nil
}

// sendDelta sends what the client lacks: resources whose version differs
// from what it holds, and removals of what no longer exists. With force, a
// response goes out even when empty (answering a first request).
func (c *Connection) sendDelta(stream deltaStream, pc *model.PushContext, w *watch, ev *pushEvent, force bool) error {
	c.mu.Lock()
	var names []string
	if !w.wildcard {
		names = w.names // never modified in place
	}
	subscribed := w.wildcard || len(names) > 0
	c.mu.Unlock()
	if !subscribed && !force {
		return nil
	}
	partial := ev != nil && !ev.full && w.typeURL == gen.EndpointType
	if partial {
		names = c.changedClusters(ev, names)
		if len(names) == 0 {
			return nil
		}
	}
	var rs []*gen.Resource
	if subscribed {
		var ok bool
		if rs, ok = c.generateFor(ev, pc, w, names); !ok {
			return nil // nothing sent: the client keeps what it holds
		}
	}
	if !partial {
		// Shared first: the sidecars of a scope then compare the same two
		// lists, once per push (ev.changed).
		rs = c.server.lists.share(rs)
	}
	c.mu.Lock()
	resp := &deltaResponse{typeURL: w.typeURL, systemVersion: pc.Version}
	for _, r := range ev.changed(w.held, rs) {
		if v, ok := w.initial[r.Name]; ok && v == r.Version {
			continue // the client brought it from its previous stream
		}
		resp.resources = append(resp.resources, r)
	}
	// What the client holds but is gone: for wildcard everything absent, for
	// named subscriptions the subscribed names that no longer exist.
	if !partial {
		resp.removed = slices.Clone(ev.missing(w.held, rs)) // appended to and sorted below
		// What the client brought that no longer exists: the initial
		// names left once those generated are settled.
		w.settleInitial(rs, nil)
		for n := range w.initial {
			if !slices.Contains(resp.removed, n) {
				resp.removed = append(resp.removed, n)
			}
		}
		slices.Sort(resp.removed)
	}
	if partial {
		w.held = c.server.overlays.overlay(w.held, rs)
	} else {
		w.held = rs
	}
	w.settleInitial(rs, resp.removed)
	if len(resp.resources) == 0 && len(resp.removed) == 0 && !force {
		c.mu.Unlock()
		return nil
	}
	resp.nonce = c.nextNonce()
	w.nonceSent, w.versionSent, w.sentAt = resp.nonce, pc.Version, time.Now()
	c.mu.Unlock()
	resp.body = c.server.bodies.get(w.typeURL, true, resp.resources)
	if err := stream.SendMsg(resp); err != nil {
		return fmt.Errorf("send delta %s to %s: %w", typeLabel(w.typeURL), c.proxy.ID, err)
	}
	c.server.metrics.Push(typeLabel(w.typeURL))
	return nil
}

func byName(r *gen.Resource, name string) int { return strings.Compare(r.Name, name) }

// missing returns the names in held that are not in next (both sorted).
func missing(held, next []*gen.Resource) []string {
	var out []string
	j := 0
	for _, r := range held {
		for j < len(next) && next[j].Name < r.Name {
			j++
		}
		if j == len(next) || next[j].Name != r.Name {
			out = append(out, r.Name)
		}
	}
	return out
}
