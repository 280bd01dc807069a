package xds

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod/metrics"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// Options configure a Server.
type Options struct {
	// Log receives the server's logs.
	Log *slog.Logger
	// Metrics records pushes, NACKs and connections (nil: none).
	Metrics *metrics.Metrics
	// PushConcurrency bounds proxies being pushed to at once (default 100,
	// Istio's PILOT_PUSH_THROTTLE).
	PushConcurrency int
	// Generate builds the resources of a type for a proxy (nil:
	// gen.Generate). Tests wrap gen.Generate to make it fail.
	Generate GenerateFunc
	// Identity returns what a stream proved to be (nil or false: nothing,
	// as on the plaintext port). Debug types need it.
	Identity func(ctx context.Context) (Identity, bool)
	// SystemNamespace is the namespace whose callers read every proxy's
	// debug state (default istio-system); others see their own namespace.
	SystemNamespace string
	// IdentityCheckOff lets an authenticated stream claim a node of any
	// namespace and service account (Istio's
	// PILOT_ENABLE_XDS_IDENTITY_CHECK=false). By default the node's must be
	// the identity's, as in Istio.
	IdentityCheckOff bool
	// DebugAuthOff serves debug types to unauthenticated callers, as
	// Istio's ENABLE_DEBUG_ENDPOINT_AUTH=false.
	DebugAuthOff bool
	// ControlPlane names this istiod in syncz responses.
	ControlPlane ControlPlane
	// PushDone, if set, is called once a push reached every connection it
	// was queued for (not when one of them closed first); full says
	// whether it was a full push. istiod can return the push's garbage to
	// the OS then.
	PushDone func(full bool)
	// Synced, if set, is called after a stream answered a type for the
	// first time: a proxy connecting, or every proxy reconnecting after an
	// istiod restart, which allocates as much as a full push. istiod can
	// return that garbage to the OS once the streams settle.
	Synced func()
}

// GenerateFunc builds the resources of typeURL for proxy p, as gen.Generate.
type GenerateFunc func(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*gen.Resource, error)

// Server serves ADS. Call Push with each new PushContext.
type Server struct {
	log      *slog.Logger
	metrics  *metrics.Metrics
	pushes   *workQueue[*Connection]
	generate GenerateFunc

	identity        func(context.Context) (Identity, bool)
	systemNamespace string
	debugAuthOff    bool
	identityOff     bool
	controlPlane    ControlPlane
	debugHTTP       debugHTTP // the HTTP debug endpoints DebugGeneric answers from (debuggeneric.go)
	pushDone        func(full bool)
	synced          func()

	pc     atomic.Pointer[model.PushContext]
	nextID atomic.Uint64

	mu    sync.RWMutex
	conns map[string]*Connection

	names interner
	// bodies holds encoded response bodies shared by streams.
	bodies bodies
	// nameLists holds subscribed-name lists shared by connections.
	nameLists nameLists
	// overlays shares the held lists endpoint-only pushes produce, lists
	// the held lists of full pushes.
	overlays overlays
	lists    lists
}

var _ adsHandler = (*Server)(nil)

// New returns a server with no push context: streams wait for the first.
func New(o Options) *Server {
	if o.PushConcurrency <= 0 {
		o.PushConcurrency = 100
	}
	if o.Generate == nil {
		o.Generate = gen.Generate
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = "istio-system"
	}
	return &Server{
		log:      o.Log.With("component", "xds"),
		metrics:  o.Metrics,
		pushes:   newWorkQueue(o.PushConcurrency, (*Connection).pushPending),
		generate: o.Generate,

		identity:        o.Identity,
		systemNamespace: o.SystemNamespace,
		debugAuthOff:    o.DebugAuthOff,
		identityOff:     o.IdentityCheckOff,
		controlPlane:    o.ControlPlane,
		pushDone:        o.PushDone,
		synced:          o.Synced,
		conns:           map[string]*Connection{},
	}
}

// Register adds the ADS service to g, which must have been created with
// ServerOptions.
func (s *Server) Register(g grpc.ServiceRegistrar) { g.RegisterService(&adsService, s) }

// PushContext returns the current snapshot (nil before the first push).
func (s *Server) PushContext() *model.PushContext { return s.pc.Load() }

// Push makes pc current and queues a push of change to every connection.
// Pushes are merged per connection: a slow proxy gets the latest state once.
func (s *Server) Push(pc *model.PushContext, change model.Change) {
	s.pc.Store(pc)
	if change.Empty() {
		return
	}
	start := time.Now()
	s.mu.RLock()
	conns := make([]*Connection, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.RUnlock()
	var left atomic.Int64
	var targets []*Connection
	ev := &pushEvent{pc: pc, full: change.Full, hosts: change.Hosts, start: start, done: []func(){func() {
		if left.Add(-1) == 0 {
			s.log.Debug("push complete", "version", pc.Version, "full", change.Full, "proxies", len(targets), "took", time.Since(start))
			if s.pushDone != nil {
				s.pushDone(change.Full)
			}
		}
	}}}
	// A change of pods alone concerns only the proxies that take their
	// labels from them.
	events := make([]*pushEvent, 0, len(conns))
	for _, c := range conns {
		if e := ev.forProxy(c.proxy, change.Proxies); e.full || len(e.hosts) > 0 {
			events, targets = append(events, e), append(targets, c)
		}
	}
	if len(targets) == 0 && s.pushDone != nil {
		s.pushDone(change.Full)
	}
	left.Store(int64(len(targets)))
	for i, c := range targets {
		c.enqueue(events[i])
	}
}

// answeredFirst runs the Synced hook: a stream answered a type for the
// first time.
func (s *Server) answeredFirst() {
	if s.synced != nil {
		s.synced()
	}
}

// Connections returns the connected streams, sorted by id.
func (s *Server) Connections() []*Connection {
	s.mu.RLock()
	out := make([]*Connection, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Connection) int { return strings.Compare(a.id, b.id) })
	return out
}

// Status reports every connection's sync state, for /debug/syncz.
func (s *Server) Status() []ProxyStatus {
	var out []ProxyStatus
	for _, c := range s.Connections() {
		out = append(out, c.Status())
	}
	return out
}

// Proxy returns the proxy of the first connection with node id id.
func (s *Server) Proxy(id string) (*model.Proxy, bool) {
	for _, c := range s.Connections() {
		if c.proxy.ID == id {
			return c.proxy, true
		}
	}
	return nil, false
}

func (s *Server) addConn(c *Connection) {
	s.mu.Lock()
	s.conns[c.id] = c
	s.mu.Unlock()
	s.metrics.Connect(1)
	s.log.Debug("proxy connected", "proxy", c.proxy.ID, "connection", c.id, "delta", c.delta)
}

func (s *Server) removeConn(c *Connection) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	s.metrics.Connect(-1)
	s.log.Debug("proxy disconnected", "proxy", c.proxy.ID, "connection", c.id)
}

// waitPushContext blocks until the first push context exists.
func (s *Server) waitPushContext(ctx context.Context) (*model.PushContext, error) {
	for {
		if pc := s.pc.Load(); pc != nil {
			return pc, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) newConnection(p *model.Proxy, meta *structpb.Struct, delta bool) *Connection {
	fields := meta.GetFields()
	return &Connection{
		id:           fmt.Sprintf("%s-%d", p.ID, s.nextID.Add(1)),
		proxy:        p,
		clusterID:    fields["CLUSTER_ID"].GetStringValue(),
		istioVersion: fields["ISTIO_VERSION"].GetStringValue(),
		delta:        delta,
		connected:    time.Now(),
		watched:      map[string]*watch{},
		server:       s,
	}
}

// typeLabel is the metrics label of a type URL ("cds").
func typeLabel(typeURL string) string { return strings.ToLower(gen.ShortName(typeURL)) }
