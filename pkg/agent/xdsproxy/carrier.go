package xdsproxy

import (
	"context"
	"sync"
	"time"
)

// carrier records which of the proxy's downstream streams carries the
// agent's NameTable subscription to istiod. As Istio's agent does, the
// agent asks for the table on Envoy's own stream, so a pod is one stream on
// istiod; the agent opens a stream of its own only while no downstream
// carries it (no Envoy yet, or none at all).
type carrier struct {
	mu        sync.Mutex
	owner     *carried
	delivered bool          // the owner's stream has delivered a table
	changed   chan struct{} // closed and replaced on every change
}

// carried is one downstream stream's claim.
type carried struct{ _ byte }

// claim makes the downstream stream s the NameTable's carrier if the agent
// wants the table, Envoy may carry it, and no other stream does; nil if not.
func (p *Proxy) claim(s *carried) *carried {
	if p.opts.OnNameTable == nil || p.opts.NoEnvoy || !p.carrier.claim(s) {
		return nil
	}
	return s
}

func newCarrier() *carrier { return &carrier{changed: make(chan struct{})} }

func (c *carrier) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// claim makes s the carrier if no stream is; it reports whether s is.
func (c *carrier) claim(s *carried) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner != nil {
		return c.owner == s
	}
	c.owner, c.delivered = s, false
	c.notify()
	return true
}

// release ends s's claim (its downstream stream has ended).
func (c *carrier) release(s *carried) {
	if s == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == s {
		c.owner, c.delivered = nil, false
		c.notify()
	}
}

// deliver records that s's stream has delivered a table.
func (c *carrier) deliver(s *carried) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == s && !c.delivered {
		c.delivered = true
		c.notify()
	}
}

func (c *carrier) state() (owned, delivered bool, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner != nil, c.delivered, c.changed
}

// waitUncarried returns true once no stream has carried the table for
// grace, false if ctx ends first.
func (c *carrier) waitUncarried(ctx context.Context, grace time.Duration) bool {
	for {
		owned, _, changed := c.state()
		if !owned {
			t := time.NewTimer(grace)
			select {
			case <-t.C:
				return true
			case <-changed:
				t.Stop()
				continue
			case <-ctx.Done():
				t.Stop()
				return false
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// waitDelivered returns true once a carrier's stream has delivered a
// table, false if ctx ends first.
func (c *carrier) waitDelivered(ctx context.Context) bool {
	for {
		_, delivered, changed := c.state()
		if delivered {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}
