package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject/injecttest"
)

type config struct {
	istiod                       string
	controlPlane, source         string
	services, endpoints, clients int
	spread                       spread // namespaces the services and sidecars are spread over
	streamsPerConn               int
	env                          []string // added to istiod's environment
	args                         []string // added to istiod's flags
	fullPushes, edsChanges       int
	edsDebounce                  bool
	logLevel                     string
	pushConcurrency              int
	delta                        bool
	timeout                      time.Duration
	rest                         time.Duration // quiet time before the RSS at rest
	profiles                     string        // directory for istiod's profiles at rest; "" for none
	agentStreams                 bool          // a NameTable stream per sidecar besides its ADS stream
	ndsOnADS                     bool          // the NameTable subscribed on each sidecar's ADS stream
	nodeMetadata                 bool          // each node carries an Istio agent's metadata
	apps                         int           // with nodeMetadata: apps the sidecars are replicas of (0: each its own)
	tls                          bool          // connect to the TLS port (15012) with a workload certificate
	pods                         bool          // a pod per endpoint, injected and running
	rolloutSteps                 int           // timed rollout steps: a new pod, then its endpoint (with pods)
	reconnects                   int           // timed reconnects of every delta client with the versions it holds
}

// phase is one timed change: how long until every client had it.
type phase struct {
	name    string
	samples []time.Duration // per iteration: until the last client
	clients []time.Duration // per client delivery, all iterations
	cpu     time.Duration   // istiod CPU over all iterations
	selfCPU time.Duration   // the load generator's CPU
	acked   bool            // measure until ACKed (else until received)
	// the response and ACK bytes of all clients over all iterations
	traffic
}

type results struct {
	clients, conns int
	baseRSS        int64      // before any client connected
	syncRSS        int64      // after the initial sync
	load0, load    [3]float64 // load averages before and after the run
	connect        time.Duration
	connectCPU     time.Duration
	phases         []*phase
	rss, peak      int64
	rest           memInfo // cfg.rest after the last change
	bytesPerClient int64
	reopened       int64 // streams the control plane ended over the whole run
}

func run(ctx context.Context, cfg config, log *slog.Logger) (*results, error) {
	cp, err := startControlPlane(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer cp.close()
	pid, mesh := cp.Pid(), cp.mesh

	edsNames := make([]string, cfg.services)
	for i := range edsNames {
		edsNames[i] = cfg.spread.cluster(i)
	}
	edsEnc := encodeNames(edsNames)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &results{clients: cfg.clients, load0: loadAvg()}
	// istiod has built its first push context; let it settle before the
	// baseline the per-client memory is measured against.
	time.Sleep(500 * time.Millisecond)
	m, _ := memory(pid)
	res.baseRSS = m.rss
	cpu0, _ := cpuTime(pid)
	start := time.Now()
	addr, creds := cp.GRPCAddr, map[string]credentials.TransportCredentials{}
	for _, ns := range cfg.spread.namespaces() {
		creds[ns] = insecure.NewCredentials()
	}
	if cfg.tls {
		if creds, err = sidecarTLS(filepath.Join(cp.Work, "var/lib/istio/ca"), cfg.spread.namespaces()); err != nil {
			return nil, err
		}
		addr = cp.SecureAddr
	}
	clients := make([]*client, cfg.clients)
	var conns []*grpc.ClientConn
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range clients {
		// A connection's streams are one namespace's: they share its
		// certificate.
		ns := cfg.spread.ns(i / cfg.streamsPerConn)
		if i%cfg.streamsPerConn == 0 {
			conn, err := newConn(addr, creds[ns])
			if err != nil {
				return nil, err
			}
			conns = append(conns, conn)
		}
		c, err := dial(cctx, conns[len(conns)-1], i, ns, edsNames, edsEnc, cfg.delta, cfg.nodeMetadata)
		if err != nil {
			return nil, err
		}
		if cfg.ndsOnADS {
			c.subscribed = len(types)
		}
		c.track = cfg.reconnects > 0
		c.apps = cfg.apps
		clients[i] = c
		wg.Go(func() {
			if err := c.serve(cctx); err != nil && cctx.Err() == nil {
				log.Warn("client ended", "client", c.id, "err", err)
			}
		})
		if cfg.agentStreams {
			conn, id := conns[len(conns)-1], i
			wg.Go(func() {
				if err := runAgentStream(cctx, conn, id, ns); err != nil && cctx.Err() == nil {
					log.Warn("agent stream ended", "client", id, "err", err)
				}
			})
		}
	}
	res.conns = len(conns)
	if _, err := waitAll(ctx, clients, start, []int{cds, eds, lds, rds}, cfg.timeout, true); err != nil {
		return nil, fmt.Errorf("initial sync: %w", err)
	}
	res.connect = time.Since(start)
	cpu1, _ := cpuTime(pid)
	res.connectCPU = cpu1 - cpu0
	var total int64
	for _, c := range clients {
		total += c.received()
	}
	res.bytesPerClient = total / int64(len(clients))
	m, _ = memory(pid)
	res.syncRSS = m.rss
	log.Info("clients synced", "clients", cfg.clients, "took", res.connect, "reopened", reopened(clients))
	time.Sleep(500 * time.Millisecond)

	full := &phase{name: "full push (new service + endpoint change: CDS, EDS, LDS, RDS to every client), until ACKed", acked: true}
	vs := &phase{name: "VirtualService change (RDS to every client), until ACKed", acked: true}
	epc := &phase{name: "endpoint change (EDS to every subscriber), until received"}
	for k := range cfg.fullPushes {
		err := timed(ctx, pid, full, clients, []int{cds, eds, lds, rds}, cfg.timeout, func() error {
			if err := writeNewService(mesh, cfg.spread, k); err != nil {
				return err
			}
			return writeSlice(mesh, cfg.spread, cfg.services-1, cfg.endpoints, 60+k%40, cfg.pods)
		})
		if err != nil {
			return nil, fmt.Errorf("full push %d: %w", k, err)
		}
		time.Sleep(300 * time.Millisecond)
		err = timed(ctx, pid, vs, clients, []int{rds}, cfg.timeout, func() error {
			return mesh.put("virtualservices-extra.yaml", fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: extra, namespace: %s}
spec:
  hosts: [%s]
  http: [{route: [{destination: {host: %s}}], timeout: %ds}]
`, cfg.spread.ns(1), svcName(1), svcName(1), k+1))
		})
		if err != nil {
			return nil, fmt.Errorf("VirtualService change %d: %w", k, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for k := range cfg.edsChanges {
		i := (k * 37) % cfg.services
		if err := timed(ctx, pid, epc, clients, []int{eds}, cfg.timeout, func() error {
			// Generations 1..99: addresses repeat mod 100, and generation 0
			// is the slice as first written, which would be no change.
			return writeSlice(mesh, cfg.spread, i, cfg.endpoints, 1+k%99, cfg.pods)
		}); err != nil {
			return nil, fmt.Errorf("endpoint change %d: %w", k, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	res.phases = []*phase{full, vs, epc}
	if cfg.rolloutSteps > 0 {
		rollout := &phase{name: "rollout step (a new pod, then its endpoint: EDS to every subscriber), until received"}
		in, err := injecttest.Injector()
		if err != nil {
			return nil, err
		}
		for k := range cfg.rolloutSteps {
			i := (k*53 + 11) % cfg.services
			if err := timed(ctx, pid, rollout, clients, []int{eds}, cfg.timeout, func() error {
				return writeRolloutStep(mesh, in, cfg.spread, i, cfg.endpoints, k)
			}); err != nil {
				return nil, fmt.Errorf("rollout step %d: %w", k, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		res.phases = append(res.phases, rollout)
	}
	if cfg.reconnects > 0 {
		rc := &phase{name: "reconnect (every client's stream ended and opened again with the versions it holds, as after an istiod restart), until every type answered and ACKed", acked: true}
		for k := range cfg.reconnects {
			if err := timed(ctx, pid, rc, clients, []int{cds, eds, lds, rds}, cfg.timeout, func() error {
				for _, c := range clients {
					c.restart()
				}
				return nil
			}); err != nil {
				return nil, fmt.Errorf("reconnect %d: %w", k, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		res.phases = append(res.phases, rc)
	}
	m, _ = memory(pid)
	res.rss, res.peak = m.rss, m.peak
	res.load = loadAvg()
	res.reopened = reopened(clients)
	if cfg.rest > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cfg.rest):
		}
		res.rest, _ = memory(pid)
		if cfg.profiles != "" {
			if err := saveProfiles(ctx, "http://"+cp.DebugAddr, cfg.profiles, cfg.clients); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// timed applies change and waits until every client received a response of
// every type in want.
func timed(ctx context.Context, pid int, p *phase, clients []*client, want []int, timeout time.Duration, change func() error) error {
	cpu0, _ := cpuTime(pid)
	self0, _ := cpuTime(os.Getpid())
	before := trafficOf(clients)
	t0 := time.Now()
	if err := change(); err != nil {
		return err
	}
	per, err := waitAll(ctx, clients, t0, want, timeout, p.acked)
	if err != nil {
		return err
	}
	cpu1, _ := cpuTime(pid)
	self1, _ := cpuTime(os.Getpid())
	p.cpu += cpu1 - cpu0
	p.selfCPU += self1 - self0
	p.traffic.add(trafficOf(clients), before)
	p.samples = append(p.samples, slices.Max(per))
	p.clients = append(p.clients, per...)
	return nil
}

// traffic is bytes received, by type, and sent in ACKs.
type traffic struct {
	typeBytes [5]int64 // indexed as types
	ackBytes  int64
}

// recvBytes is the bytes received, of every type.
func (t traffic) recvBytes() int64 {
	var n int64
	for _, b := range t.typeBytes {
		n += b
	}
	return n
}

// trafficOf sums what every client received and sent in ACKs so far.
func trafficOf(clients []*client) traffic {
	var t traffic
	for _, c := range clients {
		t.ackBytes += c.ackBytes.Load()
		for i := range t.typeBytes {
			t.typeBytes[i] += c.typeBytes[i].Load()
		}
	}
	return t
}

// add adds what passed between before and after.
func (t *traffic) add(after, before traffic) {
	t.ackBytes += after.ackBytes - before.ackBytes
	for i := range t.typeBytes {
		t.typeBytes[i] += after.typeBytes[i] - before.typeBytes[i]
	}
}

// waitAll waits until every client got every wanted type after t0 and
// returns, per client, when the last of them arrived.
func waitAll(ctx context.Context, clients []*client, t0 time.Time, want []int, timeout time.Duration, acked bool) ([]time.Duration, error) {
	deadline := time.Now().Add(timeout)
	since := t0.UnixNano()
	at := func(c *client, t int) int64 {
		if acked {
			return c.acked[t].Load()
		}
		return c.recv[t].Load()
	}
	for {
		done, missing := 0, -1
		for i, c := range clients {
			ok := true
			for _, t := range want {
				if at(c, t) <= since {
					ok = false
					break
				}
			}
			if ok {
				done++
			} else if missing < 0 {
				missing = i
			}
		}
		if done == len(clients) {
			break
		}
		if time.Now().After(deadline) {
			var got []string
			for _, t := range want {
				n := 0
				for _, c := range clients {
					if at(c, t) > since {
						n++
					}
				}
				got = append(got, fmt.Sprintf("%s:%d", []string{"CDS", "EDS", "LDS", "RDS"}[t], n))
			}
			return nil, fmt.Errorf("after %v only %d of %d clients have it (client %d missing; per type %v)", timeout, done, len(clients), missing, got)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	per := make([]time.Duration, len(clients))
	for i, c := range clients {
		var last int64
		for _, t := range want {
			last = max(last, at(c, t))
		}
		per[i] = time.Duration(last - since)
	}
	return per, nil
}

// reopened is how many streams the control plane has ended so far.
func reopened(clients []*client) int64 {
	var n int64
	for _, c := range clients {
		n += c.reopened.Load()
	}
	return n
}
