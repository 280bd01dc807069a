package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Clients are the REST clients an election uses.
type Clients struct {
	// Coordination is a coordination.k8s.io/v1 client: the Leases.
	Coordination rest.Interface
	// Core is a core/v1 client: whether a holder's pod still exists
	// (reclaim.go).
	Core rest.Interface
}

// Kube elects with coordination.k8s.io Leases named after the singletons
// in cfg.Namespace, held by cfg.Identity. A leader that stops (its context
// ends) releases its leases, so a successor takes over at once; one that
// crashes keeps them until they expire (cfg.LeaseDuration), unless its pod
// is gone (reclaim.go).
type Kube struct {
	client Clients
	cfg    Config
	log    *slog.Logger
	wg     sync.WaitGroup

	// self caches whether cfg.Identity is a pod of cfg.Namespace (reclaim.go).
	selfMu sync.Mutex
	self   *bool
}

var _ Elector = (*Kube)(nil)

// NewKube returns an Elector for cfg (see New for one that honours
// cfg.Enabled).
func NewKube(client Clients, cfg Config, log *slog.Logger) *Kube {
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Kube{client: client, cfg: cfg, log: log.With("component", "leader", "identity", cfg.Identity)}
}

// New returns Always when elections are off, else NewKube.
func New(client Clients, cfg Config, log *slog.Logger) Elector {
	if !cfg.Enabled {
		if log != nil {
			log.Info("leader election disabled; running every singleton")
		}
		return Always{}
	}
	return NewKube(client, cfg, log)
}

// Wait returns when every campaign has ended, so that a stopping process
// exits only once its leases are released.
func (k *Kube) Wait() { k.wg.Wait() }

// Go campaigns for the lease name (see Elector).
func (k *Kube) Go(ctx context.Context, name string, fn func(ctx context.Context)) {
	k.wg.Go(func() { k.campaign(ctx, name, fn) })
}

func (k *Kube) campaign(ctx context.Context, name string, fn func(ctx context.Context)) {
	log := k.log.With("lease", k.cfg.Namespace+"/"+name)
	for ctx.Err() == nil {
		err := k.term(ctx, name, log, fn)
		if errors.Is(err, errRetryNow) {
			continue
		}
		if err != nil {
			// Only invalid durations fail, and Config rules them out.
			log.Error("leader election", "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(k.cfg.RetryPeriod()):
		}
	}
}

// term campaigns until this process has led once and stopped leading, or
// ctx ends. fn has returned when term returns.
func (k *Kube) term(ctx context.Context, name string, log *slog.Logger, fn func(context.Context)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leading := make(chan context.Context, 1)
	observed := make(chan struct{}, 1) // a new holder seen: reclaim looks at once
	le := &elector{
		client: k.client.Coordination, namespace: k.cfg.Namespace, name: name, id: k.cfg.Identity,
		duration: k.cfg.LeaseDuration, deadline: k.cfg.RenewDeadline(), retry: k.cfg.RetryPeriod(),
		onStarted: func(lctx context.Context) { leading <- lctx },
		onNewLeader: func(id string) {
			if id != k.cfg.Identity {
				log.Info("leader elected", "leader", id)
			}
			select {
			case observed <- struct{}{}:
			default:
			}
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.run(ctx)
	}()
	freed, reclaimed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reclaimed)
		if k.reclaim(ctx, name, le, observed, log) {
			close(freed)
		}
	}()
	defer func() { cancel(); <-reclaimed }()
	select {
	case <-done:
		return nil // ctx ended before this process led
	case <-freed:
		// A new term takes the freed lease at once; this one would wait
		// for its next retry.
		cancel()
		<-done
		return errRetryNow
	case lctx := <-leading:
		log.Info("became leader; starting singleton")
		fn(lctx)
		if lctx.Err() == nil {
			log.Warn("singleton returned while leading; giving up the lease")
		} else if ctx.Err() == nil {
			log.Warn("lost leadership; singleton stopped")
		} else {
			log.Info("stopping; releasing the lease")
		}
		cancel()
		<-done
		return nil
	}
}
