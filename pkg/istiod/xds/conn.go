package xds

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// pushEvent is a push queued for a connection.
type pushEvent struct {
	pc    *model.PushContext
	full  bool
	hosts map[string]struct{}
	start time.Time
	// done is called once per connection when it has pushed the event (or
	// a newer event merged with it).
	done []func()

	// scopes caches, per scope, what an endpoint-only event means for its
	// proxies (scopeChange): a thousand sidecars of a namespace share one.
	scopesMu sync.Mutex
	scopes   map[*model.Scope]*scopeChange

	// What a held list lacks of a generated one, per pair of lists
	// (held.go): the connections of a scope share both.
	changedMemo diffMemo[[]*gen.Resource]
	missingMemo diffMemo[[]string]

	// A full event's load assignments per scope and shared subscription
	// (nameLists): a thousand sidecars of a scope subscribe to one list,
	// and picking it once replaces a thousand lookups of every name.
	edsMu sync.Mutex
	eds   map[edsKey][]*gen.Resource
}

// edsKey identifies a scope and a subscribed-name list by its array:
// lists are never modified in place.
type edsKey struct {
	sc    *model.Scope
	names *string
	n     int
}

// scopeChange is what an endpoint-only event changes for the proxies of
// one scope.
type scopeChange struct {
	// reads[i] says whether type gen.PushOrder()[i] is built from the
	// changed endpoints.
	reads []bool
	// clusters are the EDS cluster names of the changed hosts, sorted.
	clusters []string
}

// forScope returns the event's change for p's scope, computed once per
// scope (gen's answers depend on the proxy only through its scope).
func (e *pushEvent) forScope(p *model.Proxy) *scopeChange {
	sc := e.pc.ScopeFor(p)
	e.scopesMu.Lock()
	defer e.scopesMu.Unlock()
	if ch, ok := e.scopes[sc]; ok {
		return ch
	}
	order := gen.PushOrder()
	ch := &scopeChange{reads: make([]bool, len(order))}
	for i, typ := range order {
		ch.reads[i] = gen.ReadsEndpoints(e.pc, p, typ, e.hosts)
	}
	for h := range e.hosts {
		ch.clusters = append(ch.clusters, gen.ClusterNames(e.pc, p, h)...)
	}
	slices.Sort(ch.clusters)
	if e.scopes == nil {
		e.scopes = map[*model.Scope]*scopeChange{}
	}
	e.scopes[sc] = ch
	return ch
}

// finish reports the event pushed to one connection.
func (e *pushEvent) finish() {
	for _, f := range e.done {
		f()
	}
}

// forProxy is e for p: a full push instead when p takes its labels from
// its pod (it sends none) and that pod is among the changed ones.
func (e *pushEvent) forProxy(p *model.Proxy, pods map[string]struct{}) *pushEvent {
	if e.full || p == nil || p.Labels != nil {
		return e
	}
	if _, ok := pods[p.IP]; !ok {
		return e
	}
	return &pushEvent{pc: e.pc, full: true, start: e.start, done: e.done}
}

// merge combines a pending event with a newer one.
func (e *pushEvent) merge(n *pushEvent) *pushEvent {
	if e == nil {
		return n
	}
	m := &pushEvent{pc: n.pc, full: e.full || n.full, start: e.start, done: append(slices.Clone(e.done), n.done...)}
	if !m.full {
		m.hosts = make(map[string]struct{}, len(e.hosts)+len(n.hosts))
		for h := range e.hosts {
			m.hosts[h] = struct{}{}
		}
		for h := range n.hosts {
			m.hosts[h] = struct{}{}
		}
	}
	return m
}

// Connection is one ADS stream.
type Connection struct {
	id        string
	proxy     *model.Proxy
	delta     bool
	connected time.Time
	server    *Server
	// clusterID and istioVersion are the node's CLUSTER_ID and
	// ISTIO_VERSION metadata, for syncz.
	clusterID, istioVersion string

	// stream is the ADS stream pushes are sent on (pushq.go).
	stream grpc.ServerStream
	// pendingMu guards pending and pushing (a push goroutine runs).
	pendingMu sync.Mutex
	pending   *pushEvent
	pushing   bool
	// sendMu is held while a request is handled or an event pushed;
	// closed (under it) once the handler returned.
	sendMu sync.Mutex
	closed bool

	// mu guards watched; the stream goroutine writes, syncz reads.
	mu      sync.Mutex
	watched map[string]*watch
	nonce   uint64
}

// ID returns the connection id ("NODE-ID-N").
func (c *Connection) ID() string { return c.id }

// Proxy returns the connected proxy.
func (c *Connection) Proxy() *model.Proxy { return c.proxy }

func (c *Connection) nextNonce() string {
	c.nonce++
	return c.id + "/" + itoa(c.nonce)
}

// Status returns the sync state of every type.
func (c *Connection) Status() ProxyStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := ProxyStatus{Proxy: c.proxy.ID, ConnectionID: c.id, Delta: c.delta, Generator: c.proxy.Generator,
		ClusterID: c.clusterID, IstioVersion: c.istioVersion, ConnectedAt: c.connected, Types: map[string]TypeStatus{}}
	for _, t := range gen.PushOrder() {
		w := c.watched[t]
		ts := TypeStatus{Status: w.status()}
		if w != nil {
			ts.Sent, ts.Acked, ts.Version, ts.Resources = w.nonceSent, w.nonceAcked, w.versionSent, len(w.names)
			ts.Error = w.errorMessage()
		}
		ps.Types[gen.ShortName(t)] = ts
	}
	return ps
}

// isWildcard reports whether a first request for typeURL with names
// subscribes to everything.
func (c *Connection) isWildcard(typeURL string, names []string) bool {
	if slices.Contains(names, "*") {
		return true
	}
	return len(names) == 0 && gen.IsWildcard(typeURL) && !(c.proxy.IsGRPC() && typeURL != gen.NameTableType)
}

// sortedNames returns names sorted and deduplicated, without "*".
func sortedNames(names []string) []string {
	out := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "*" })
	slices.Sort(out)
	return slices.Compact(out)
}

// setHash fingerprints a response's resource set (sorted by name).
func setHash(rs []*gen.Resource) string {
	var h uint64 = 14695981039346656037
	for _, r := range rs {
		h = (h ^ r.Hash) * 1099511628211
	}
	return itoa(h) + "/" + itoa(len(rs))
}

// inHosts keeps the resources whose cluster is of a changed host.
func inHosts(rs []*gen.Resource, hosts map[string]struct{}) []*gen.Resource {
	var out []*gen.Resource
	for _, r := range rs {
		if _, ok := hosts[gen.EndpointHosts(r.Name)]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Subscribed returns the names subscribed for typeURL; nil means wildcard
// or not subscribed.
func (c *Connection) Subscribed(typeURL string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watched[typeURL]
	if w == nil || w.wildcard {
		return nil
	}
	return slices.Clone(w.names)
}

// Watched returns the type URLs the stream has subscribed to, sorted.
func (c *Connection) Watched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.watched))
	for t := range c.watched {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// ConnectedAt returns when the stream started.
func (c *Connection) ConnectedAt() time.Time { return c.connected }

// nameLists shares equal subscribed-name lists between connections: a
// thousand sidecars of a namespace subscribe to the same thousand clusters,
// and each held its own sorted copy. Lists are never modified in place.
type nameLists struct {
	mu sync.Mutex
	m  map[uint64][]string
}

// maxNameLists bounds the table; it starts over when full.
const maxNameLists = 1024

// share returns a list equal to names (sorted), shared when one was seen.
func (l *nameLists) share(names []string) []string {
	if len(names) < 8 {
		return names
	}
	var h maphash.Hash
	h.SetSeed(namesSeed)
	for _, n := range names {
		h.WriteString(n)
		h.WriteByte(0)
	}
	k := h.Sum64()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.m[k]; ok && slices.Equal(s, names) {
		return s
	}
	if l.m == nil || len(l.m) >= maxNameLists {
		l.m = map[uint64][]string{}
	}
	l.m[k] = names
	return names
}
