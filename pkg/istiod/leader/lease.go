package leader

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// record is what a Lease says about its holder, in the form client-go's
// leaderelection compares records in.
type record struct {
	Holder      string    `json:"holderIdentity"`
	Duration    int32     `json:"leaseDurationSeconds"`
	Acquire     time.Time `json:"acquireTime"`
	Renew       time.Time `json:"renewTime"`
	Transitions int32     `json:"leaderTransitions"`
}

func recordOf(l *coordinationv1.Lease) record {
	var r record
	if h := l.Spec.HolderIdentity; h != nil {
		r.Holder = *h
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		r.Duration = *d
	}
	if t := l.Spec.AcquireTime; t != nil {
		r.Acquire = t.Time
	}
	if t := l.Spec.RenewTime; t != nil {
		r.Renew = t.Time
	}
	if n := l.Spec.LeaseTransitions; n != nil {
		r.Transitions = *n
	}
	return r
}

// spec writes r into a Lease's spec, leaving the fields it does not hold
// (strategy, preferredHolder) as they were.
func (r record) spec(s *coordinationv1.LeaseSpec) {
	s.HolderIdentity = &r.Holder
	s.LeaseDurationSeconds = &r.Duration
	s.AcquireTime = &metav1.MicroTime{Time: r.Acquire}
	s.RenewTime = &metav1.MicroTime{Time: r.Renew}
	s.LeaseTransitions = &r.Transitions
}

// elector campaigns for one coordination.k8s.io/v1 Lease by the rules of
// client-go's leaderelection with a LeaseLock, which Istio's istiod elects
// with: a Lease is free when it has no holder or when its holder has not
// renewed it for its leaseDurationSeconds, measured on this process's clock
// from when it last saw the record change; a leader renews every
// retry period and gives up when it could not renew within the renew
// deadline; writes are updates of the version last read, so of two
// candidates only one wins. The two can therefore share a Lease, as during
// an upgrade from Istio's istiod.
type elector struct {
	client                    rest.Interface // coordination.k8s.io/v1
	namespace, name, id       string
	duration, deadline, retry time.Duration
	onStarted                 func(context.Context)
	onNewLeader               func(string)

	mu           sync.Mutex
	lease        *coordinationv1.Lease // as last read or written
	observed     record
	observedRaw  []byte
	observedTime time.Time
	reported     string
}

// leader is the holder last observed.
func (e *elector) leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed.Holder
}

func (e *elector) isLeader() bool { return e.leader() == e.id }

// run campaigns until ctx ends; once elected it calls onStarted with a
// context that ends when leadership is lost (or ctx ends) and renews until
// then, releasing the Lease on the way out.
func (e *elector) run(ctx context.Context) {
	if !e.acquire(ctx) {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.onStarted(lctx)
	e.renew(lctx, cancel)
	e.release()
}

// acquire tries every retry period (jittered up to 1.2 times more, as
// client-go does) until it holds the Lease or ctx ends.
func (e *elector) acquire(ctx context.Context) bool {
	for {
		ok := e.tryAcquireOrRenew(ctx)
		e.reportTransition()
		if ok {
			return true
		}
		wait := e.retry + time.Duration(rand.Float64()*1.2*float64(e.retry))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// renew renews every retry period until a renewal fails for the whole
// renew deadline, or ctx ends; then it cancels ctx.
func (e *elector) renew(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for ctx.Err() == nil {
		dctx, dcancel := context.WithTimeout(ctx, e.deadline)
		renewed := false
		for dctx.Err() == nil {
			if renewed = e.tryAcquireOrRenew(dctx); renewed {
				break
			}
			select {
			case <-dctx.Done():
			case <-time.After(e.retry):
			}
		}
		dcancel()
		e.reportTransition()
		if !renewed {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(e.retry):
		}
	}
}

// release gives the Lease up, so that another candidate takes it at once:
// no holder and a one-second duration, as client-go writes it.
func (e *elector) release() {
	if !e.isLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.deadline)
	defer cancel()
	now := time.Now()
	e.mu.Lock()
	r := record{Duration: 1, Acquire: now, Renew: now, Transitions: e.observed.Transitions}
	e.mu.Unlock()
	if e.update(ctx, r) == nil {
		e.setObserved(r)
	}
}

// tryAcquireOrRenew is one round of client-go's election: take or renew
// the Lease if it is free or ours.
func (e *elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	r := record{Holder: e.id, Duration: int32(e.duration / time.Second), Acquire: now, Renew: now}
	// The leader first renews the version it last wrote.
	if e.isLeader() && e.valid(now) {
		e.mu.Lock()
		r.Acquire, r.Transitions = e.observed.Acquire, e.observed.Transitions
		e.mu.Unlock()
		if e.update(ctx, r) == nil {
			e.setObserved(r)
			return true
		}
	}
	var l coordinationv1.Lease
	err := e.client.Get().Namespace(e.namespace).Resource("leases").Name(e.name).Do(ctx).Into(&l)
	if apierrors.IsNotFound(err) {
		l = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: e.name}}
		r.spec(&l.Spec)
		var created coordinationv1.Lease
		if err := e.client.Post().Namespace(e.namespace).Resource("leases").Body(&l).Do(ctx).Into(&created); err != nil {
			return false
		}
		e.mu.Lock()
		e.lease = &created
		e.mu.Unlock()
		e.setObserved(r)
		return true
	}
	if err != nil {
		return false
	}
	old := recordOf(&l)
	raw, _ := json.Marshal(old)
	e.mu.Lock()
	e.lease = &l
	if string(raw) != string(e.observedRaw) {
		e.observed, e.observedRaw, e.observedTime = old, raw, time.Now()
	}
	e.mu.Unlock()
	if old.Holder != "" && e.valid(now) && !e.isLeader() {
		return false // held, and not expired
	}
	if e.isLeader() {
		r.Acquire, r.Transitions = old.Acquire, old.Transitions
	} else {
		r.Transitions = old.Transitions + 1
	}
	if e.update(ctx, r) != nil {
		return false
	}
	e.setObserved(r)
	return true
}

// valid reports whether the observed record has not expired at now.
func (e *elector) valid(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observedTime.Add(time.Duration(e.observed.Duration) * time.Second).After(now)
}

// update writes r over the version of the Lease last read or written.
func (e *elector) update(ctx context.Context, r record) error {
	e.mu.Lock()
	if e.lease == nil {
		e.mu.Unlock()
		return apierrors.NewNotFound(coordinationv1.Resource("leases"), e.name)
	}
	l := e.lease.DeepCopy()
	e.mu.Unlock()
	r.spec(&l.Spec)
	var out coordinationv1.Lease
	if err := e.client.Put().Namespace(e.namespace).Resource("leases").Name(e.name).Body(l).Do(ctx).Into(&out); err != nil {
		return err
	}
	e.mu.Lock()
	e.lease = &out
	e.mu.Unlock()
	return nil
}

func (e *elector) setObserved(r record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed, e.observedTime = r, time.Now()
}

// reportTransition tells onNewLeader about a holder not reported before.
func (e *elector) reportTransition() {
	e.mu.Lock()
	h := e.observed.Holder
	changed := h != e.reported
	e.reported = h
	e.mu.Unlock()
	if changed && e.onNewLeader != nil {
		go e.onNewLeader(h)
	}
}
