package xds

import (
	"errors"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// generate builds one type for the connection. On failure nothing is to be
// sent for the type: the proxy keeps what it holds (an empty set would
// delete every cluster or listener). The failure is logged, counted and
// shown by syncz until the type generates again; ok is false then.
func (c *Connection) generate(pc *model.PushContext, w *watch, names []string) (rs []*gen.Resource, ok bool) {
	if order := gen.PushOrder(); !slices.Contains(order[:], w.typeURL) {
		// As Istio with no generator for a type: nothing is sent, and it is
		// not an error of istiod's.
		c.server.log.Debug("type not served", "proxy", c.proxy.ID, "type", w.typeURL)
		return nil, false
	}
	rs, err := c.server.generate(pc, c.proxy, w.typeURL, names)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		w.genError = ""
		return rs, true
	}
	label := typeLabel(w.typeURL)
	w.genError, w.genVersion = err.Error(), pc.Version
	c.server.metrics.InternalError(label)
	resource := "*" // a whole wildcard type
	if len(names) > 0 {
		resource = strings.Join(names, ",")
	}
	if re := (*gen.ResourceError)(nil); errors.As(err, &re) {
		resource = re.Name
	}
	c.server.log.Error("generate failed: nothing sent, the proxy keeps its last config", "proxy", c.proxy.ID,
		"type", label, "resource", resource, "version", pc.Version, "err", err)
	return nil, false
}

// generateFor is generate, shared by the sidecars of a full event that
// subscribe to the same list of load assignments in the same scope: gen's
// answers depend on a sidecar only through its scope (see forScope).
func (c *Connection) generateFor(ev *pushEvent, pc *model.PushContext, w *watch, names []string) ([]*gen.Resource, bool) {
	if ev == nil || !ev.full || w.typeURL != gen.EndpointType || len(names) < minSharedNames || c.proxy.IsGRPC() {
		return c.generate(pc, w, names)
	}
	k := edsKey{pc.ScopeFor(c.proxy), &names[0], len(names)}
	ev.edsMu.Lock()
	e := ev.eds[k]
	if e == nil {
		if ev.eds == nil {
			ev.eds = map[edsKey]*edsEntry{}
		}
		e = &edsEntry{}
		ev.eds[k] = e
	}
	ev.edsMu.Unlock()
	ran := false
	e.once.Do(func() { ran = true; e.rs, e.ok = c.generate(pc, w, names) })
	switch {
	case ran:
		return e.rs, e.ok
	case !e.ok:
		return c.generate(pc, w, names) // each connection records its own failure
	}
	c.mu.Lock()
	w.genError = ""
	c.mu.Unlock()
	return e.rs, true
}
