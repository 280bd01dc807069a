package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// Server is the DNS proxy. Create it with New, feed it with UpdateTable,
// serve with Start and stop with Close.
type Server struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics
	cache *cache
	fwd   *forwarder
	epoch time.Time

	table      atomic.Pointer[table]
	wildRotate atomic.Uint32

	buildMu sync.Mutex // serialises table builds
	ports   *portIndex // the latest service ports; nil before any

	inflight chan struct{} // slots for queries waiting for an upstream

	evMu       sync.Mutex           // guards the event path's flights
	evFlights  map[string]*evFlight // by cache key
	evClosed   bool
	evTimer    *time.Timer // the sweeper of flights past their attempt deadline
	evSweeping bool
	tcpSlots   chan struct{} // slots for client TCP connections

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	started   bool
	closed    bool
	stopCtx   func() bool
	udp       []*net.UDPConn
	tcp       []net.Listener
	conns     map[net.Conn]struct{}
	addrs     []netip.AddrPort
	closeOnce sync.Once
}

// New validates cfg and returns a Server that answers nothing until Start.
// Metrics are registered with reg (nil: not registered) and unregistered
// by Close.
func New(cfg Config, log *slog.Logger, reg *promtext.Registry) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("dns proxy config: %w", err)
	}
	if !haveReusePort {
		cfg.UDPReaders = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		log:       log.With("component", "dnsproxy"),
		m:         m,
		cache:     newCache(cfg.CacheSize, cfg.CacheMaxTTL),
		epoch:     time.Now(),
		inflight:  make(chan struct{}, cfg.MaxInflight),
		tcpSlots:  make(chan struct{}, cfg.MaxTCPConns),
		ctx:       ctx,
		cancel:    cancel,
		conns:     map[net.Conn]struct{}{},
		evFlights: map[string]*evFlight{},
	}
	s.fwd = newForwarder(cfg, m, s.now)
	return s, nil
}

// now is the server's monotonic clock.
func (s *Server) now() time.Duration { return time.Since(s.epoch) }

// Ready reports whether the first NameTable has arrived, so mesh names
// resolve. Before that every query is forwarded.
func (s *Server) Ready() bool { return s.table.Load() != nil }

// UpdateTable replaces the mesh name table. It is safe to call at any time
// from any goroutine; queries see either the old or the new table.
func (s *Server) UpdateTable(nt *nds.NameTable) {
	if nt == nil {
		nt = &nds.NameTable{}
	}
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.rebuild(nt)
}

// UpdateServicePorts replaces the service ports used for SRV answers, keyed
// by host name as in the NameTable ("reviews.default.svc.cluster.local").
// The table is not rebuilt: SRV answers are made when asked.
func (s *Server) UpdateServicePorts(ports map[string][]ServicePort) {
	idx := newPortIndex(ports)
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.ports = idx
	if cur := s.table.Load(); cur != nil {
		t := *cur
		t.ports = idx
		s.table.Store(&t)
	}
	s.log.Debug("service ports updated", "hosts", len(idx.hosts))
}

// rebuild builds the table of nt and publishes it; buildMu must be held.
func (s *Server) rebuild(nt *nds.NameTable) {
	start := time.Now()
	t := buildTable(nt, tableOptions{
		namespace: s.cfg.Namespace,
		svcDomain: "svc." + strings.Trim(strings.ToLower(s.cfg.ClusterDomain), "."),
		search:    s.cfg.SearchDomains,
		ports:     s.ports,
	}, s.log)
	s.table.Store(t)
	s.log.Info("name table updated", "hosts", t.hosts, "questions", t.questions,
		"wildcards", len(t.wildcards), "took", time.Since(start))
}

// Start binds every listener and starts serving. It returns once the
// sockets are bound (so a test can query right away); serving stops on
// Close or when ctx is done.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("dns proxy: Start called twice or after Close")
	}
	s.started = true
	if err := s.listen(); err != nil {
		s.closeListeners()
		return err
	}
	for _, c := range s.udp {
		s.wg.Add(1)
		go s.readUDP(c)
	}
	for _, l := range s.tcp {
		s.wg.Add(1)
		go s.acceptTCP(l)
	}
	s.stopCtx = context.AfterFunc(ctx, func() { _ = s.Close() })
	s.log.Info("dns proxy listening", "addrs", s.addrs, "udp_readers", s.cfg.UDPReaders,
		"upstreams", s.cfg.Upstreams, "parallel", s.cfg.ForwardParallel)
	return nil
}

// Addrs returns the addresses being served (with the chosen port when the
// configuration asked for port 0).
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.addrs...)
}

// Close stops serving: it closes every socket, cancels forwarded queries,
// waits for every goroutine to return and unregisters the metrics. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.stopCtx != nil {
			s.stopCtx()
		}
		s.cancel()
		s.closeListeners()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.evClose()
		s.wg.Wait()
		s.fwd.close()
		s.m.unregister()
	})
	return nil
}

// closeListeners closes the sockets; s.mu must be held.
func (s *Server) closeListeners() {
	for _, c := range s.udp {
		_ = c.Close()
	}
	for _, l := range s.tcp {
		_ = l.Close()
	}
}

// track records a client connection so Close can end it; false if closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
