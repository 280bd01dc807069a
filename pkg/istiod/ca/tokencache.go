package ca

import (
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// verifiedToken is what a fully verified token proved: its identity, and
// the time claims that must still be checked at each use.
type verifiedToken struct {
	id    spiffe.ID
	times tokenTimes
}

// tokenCache remembers verified tokens by the SHA-256 of their bytes. A
// workload sends the same token with every CSR until it rotates it, so
// verifying its signature once is enough: the bytes, and the keys they were
// checked with, do not change. Only tokens that verified are stored; an
// entry is dropped once its token has expired.
type tokenCache struct {
	max int

	mu sync.RWMutex
	m  map[[32]byte]verifiedToken
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: make(map[[32]byte]verifiedToken)}
}

func (c *tokenCache) get(key [32]byte) (verifiedToken, bool) {
	c.mu.RLock()
	v, ok := c.m[key]
	c.mu.RUnlock()
	return v, ok
}

// put stores a verified token at now. When the cache is full it first drops
// expired tokens and, if that frees nothing, an arbitrary eighth of the
// entries, so that a full cache costs one sweep per many insertions.
func (c *tokenCache) put(key [32]byte, v verifiedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		c.evictLocked(now)
	}
	c.m[key] = v
}

func (c *tokenCache) evictLocked(now time.Time) {
	for k, v := range c.m {
		if !now.Before(v.times.Expiry) {
			delete(c.m, k)
		}
	}
	for k := range c.m {
		if len(c.m) < c.max-c.max/8 {
			break
		}
		delete(c.m, k)
	}
}

func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
