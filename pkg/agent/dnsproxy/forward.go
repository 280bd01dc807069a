package dnsproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// upstreamPenalty is how long an upstream that timed out or refused is
// tried only after the healthy ones.
const upstreamPenalty = 30 * time.Second

// errNoUpstream means there is no nameserver to forward to.
var errNoUpstream = errors.New("no upstream nameservers configured")

// errRcode marks an upstream answer whose rcode says "ask someone else".
var errRcode = errors.New("upstream answered with a failure rcode")

// upstream is one nameserver and what we know about its health.
type upstream struct {
	addr     netip.AddrPort
	udp      *udpPool
	tcp      *tcpPool
	badUntil atomic.Int64 // server clock, nanoseconds
	reqUDP   *promtext.Counter
	reqTCP   *promtext.Counter
	duration *promtext.Histogram
	failures *promtext.CounterVec // reason
}

// forwarder sends questions the proxy cannot answer to the upstreams:
// in order with fast failover (or all at once when parallel), bounded by
// an overall timeout, with identical concurrent questions coalesced.
type forwarder struct {
	ups            []*upstream
	parallel       bool
	timeout        time.Duration
	attemptTimeout time.Duration
	attempts       int
	now            func() time.Duration
	flight         singleflight.Group
}

func newForwarder(cfg Config, m *metrics, now func() time.Duration) *forwarder {
	f := &forwarder{
		parallel: cfg.ForwardParallel, timeout: cfg.Timeout, attemptTimeout: min(cfg.AttemptTimeout, cfg.Timeout),
		attempts: cfg.Attempts, now: now,
	}
	for _, a := range cfg.Upstreams {
		s := a.String()
		f.ups = append(f.ups, &upstream{
			addr:     a,
			udp:      newUDPPool(a),
			tcp:      newTCPPool(a),
			reqUDP:   m.upRequests.With(s, "udp"),
			reqTCP:   m.upRequests.With(s, "tcp"),
			duration: m.upDuration.With(s),
			failures: m.upFailures.Curry(s),
		})
	}
	return f
}

// close closes the upstream sockets once no query uses them.
func (f *forwarder) close() {
	for _, u := range f.ups {
		u.udp.close()
		u.tcp.close()
	}
}

// forward returns the wire form of an upstream's answer to the query
// packed. When every upstream fails it returns the last failure answer
// (e.g. SERVFAIL) if there was one, else an error; either way within
// f.timeout.
func (f *forwarder) forward(ctx context.Context, packed []byte) ([]byte, error) {
	if len(f.ups) == 0 {
		return nil, errNoUpstream
	}
	return f.run(ctx, f.deadline(time.Now()), packed, nil)
}

// deadline is when a forward started at start must end. It keeps a little
// of the budget for answering the client, so its SERVFAIL arrives within
// the configured timeout. Deadlines, not derived contexts: this is the
// path of every forwarded query.
func (f *forwarder) deadline(start time.Time) time.Time {
	return start.Add(f.timeout - min(f.timeout/20, 100*time.Millisecond))
}

// tried is the outcome of a query's first try, made before run (by the
// event path): the upstream asked and what settle made of its answer.
type tried struct {
	u   *upstream
	r   []byte
	err error
}

// run makes forward's attempts until deadline. first, when not nil, is
// the first try of the first attempt, already made: run goes on with the
// other upstreams.
func (f *forwarder) run(ctx context.Context, deadline time.Time, packed []byte, first *tried) ([]byte, error) {
	var last []byte
	var lastErr error
	for i := range f.attempts {
		var r []byte
		var err error
		switch {
		case f.parallel:
			r, err = f.race(ctx, deadline, packed)
		case i == 0:
			r, err = f.serial(ctx, deadline, packed, first)
		default:
			r, err = f.serial(ctx, deadline, packed, nil)
		}
		if err == nil {
			return r, nil
		}
		if r != nil {
			last = r
		}
		lastErr = err
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	if last != nil {
		return last, nil
	}
	return nil, lastErr
}

// first is the upstream a serial forward tries first: the first healthy
// one in configuration order, else the first.
func (f *forwarder) first() *upstream {
	now := int64(f.now())
	for _, u := range f.ups {
		if u.badUntil.Load() <= now {
			return u
		}
	}
	return f.ups[0]
}

// attemptDeadline is when one attempt started now must end.
func (f *forwarder) attemptDeadline(deadline time.Time) time.Time {
	if d := time.Now().Add(f.attemptTimeout); d.Before(deadline) {
		return d
	}
	return deadline
}

// serial tries each upstream in turn, healthy ones first, until deadline.
// done, when not nil, is a try already made: its upstream is not asked
// again.
func (f *forwarder) serial(ctx context.Context, deadline time.Time, packed []byte, done *tried) ([]byte, error) {
	var last []byte
	var lastErr error
	ups := f.order()
	if done != nil {
		if done.err == nil {
			return done.r, nil
		}
		last, lastErr = done.r, done.err
		ups = slices.DeleteFunc(ups, func(u *upstream) bool { return u == done.u })
	}
	for _, u := range ups {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		r, err := f.try(ctx, f.attemptDeadline(deadline), u, packed)
		if err == nil {
			return r, nil
		}
		if r != nil {
			last = r
		}
		lastErr = err
	}
	if lastErr == nil {
		if lastErr = ctx.Err(); lastErr == nil {
			lastErr = context.DeadlineExceeded
		}
	}
	return last, lastErr
}

// race asks every upstream at once and returns the first good answer,
// after the others have been cancelled and have returned.
func (f *forwarder) race(ctx context.Context, deadline time.Time, packed []byte) ([]byte, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	adl := f.attemptDeadline(deadline)
	type outcome struct {
		r   []byte
		err error
	}
	results := make(chan outcome, len(f.ups))
	for _, u := range f.ups {
		go func() {
			r, err := f.try(actx, adl, u, packed)
			results <- outcome{r, err}
		}()
	}
	var win, last []byte
	var lastErr error
	for range f.ups {
		res := <-results
		switch {
		case res.err == nil && win == nil:
			win = res.r
			cancel()
		case res.err != nil:
			lastErr = res.err
			if res.r != nil {
				last = res.r
			}
		}
	}
	if win != nil {
		return win, nil
	}
	return last, lastErr
}

// try asks one upstream over UDP, then over TCP if the answer was truncated,
// until deadline or until ctx is cancelled. A failure rcode returns the
// answer together with errRcode.
func (f *forwarder) try(ctx context.Context, deadline time.Time, u *upstream, packed []byte) ([]byte, error) {
	start := time.Now()
	u.reqUDP.Inc()
	r, err := u.udp.exchange(ctx, deadline, packed)
	return f.settle(ctx, deadline, u, packed, start, r, err)
}

// settle finishes a try of u started at start whose UDP exchange gave r or
// err: it asks again over TCP when r is truncated, and keeps u's health
// and metrics. It blocks only for TCP.
func (f *forwarder) settle(ctx context.Context, deadline time.Time, u *upstream, packed []byte, start time.Time, r []byte, err error) ([]byte, error) {
	if err == nil && binary.BigEndian.Uint16(r[2:])&flagTC != 0 {
		u.reqTCP.Inc()
		r, err = u.tcp.exchange(ctx, deadline, packed)
	}
	if err != nil {
		reason := failureReason(err)
		if reason != "canceled" {
			u.failures.With(reason).Inc()
			u.badUntil.Store(int64(f.now() + upstreamPenalty))
		}
		return nil, err
	}
	u.duration.Observe(time.Since(start).Seconds())
	switch rcode := int(r[3] & 0x0f); rcode {
	case rcodeServerFailure, rcodeRefused, rcodeNotImplemented, rcodeFormatError:
		u.failures.With("rcode_" + rcodeName[rcode]).Inc()
		return r, fmt.Errorf("%s: %w %s", u.addr, errRcode, rcodeName[rcode])
	}
	if u.badUntil.Load() != 0 {
		u.badUntil.Store(0)
	}
	return r, nil
}

// order returns the upstreams to try: healthy ones first, each group in
// configuration order.
func (f *forwarder) order() []*upstream {
	now := int64(f.now())
	out := slices.Clone(f.ups)
	slices.SortStableFunc(out, func(a, b *upstream) int {
		ab, bb := a.badUntil.Load() > now, b.badUntil.Load() > now
		switch {
		case ab == bb:
			return 0
		case ab:
			return 1
		default:
			return -1
		}
	})
	return out
}

// failureReason classifies an exchange error for the failures metric.
func failureReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	default:
		return "error"
	}
}
