package dnsproxy

import (
	"hash/maphash"
	"sync"
	"time"
)

// cacheShards spreads the cache over locks so both cores can hit it.
const cacheShards = 32

// cache holds upstream answers for their TTL, bounded in entries. When a
// shard is full an expired entry, or failing that an arbitrary one, makes
// room: cheaper than LRU bookkeeping on every hit, and good enough for a
// pod's working set.
type cache struct {
	seed     maphash.Seed
	perShard int
	maxTTL   time.Duration
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]*cacheEntry
}

type cacheEntry struct {
	ans     *answer
	expires time.Duration // server clock
}

// newCache returns a cache of about size entries, or nil for size < 0.
func newCache(size int, maxTTL time.Duration) *cache {
	if size < 0 {
		return nil
	}
	c := &cache{seed: maphash.MakeSeed(), perShard: max(1, size/cacheShards), maxTTL: maxTTL}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cacheEntry)
	}
	return c
}

func (c *cache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%cacheShards]
}

// get returns the live answer for key at time now, or nil.
func (c *cache) get(key []byte, now time.Duration) *answer {
	if c == nil {
		return nil
	}
	s := c.shard(key)
	s.mu.RLock()
	e := s.m[string(key)]
	s.mu.RUnlock()
	if e == nil || now >= e.expires {
		return nil
	}
	return e.ans
}

// putAnswer caches a, an answer to the question in key, for ttl (capped by
// the cache's maximum) from now.
func (c *cache) putAnswer(key []byte, a *answer, ttl, now time.Duration) {
	if c == nil {
		return
	}
	ttl = min(ttl, c.maxTTL)
	if a.age == nil {
		a.age = &aging{}
	}
	a.age.stored = now
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.m[string(key)]; !exists && len(s.m) >= c.perShard {
		evicted := false
		n := 0
		for k, e := range s.m {
			if now >= e.expires {
				delete(s.m, k)
				evicted = true
			}
			if n++; n >= 8 {
				break
			}
		}
		if !evicted {
			for k := range s.m {
				delete(s.m, k)
				break
			}
		}
	}
	s.m[string(key)] = &cacheEntry{ans: a, expires: now + ttl}
}

// len returns the number of entries, live or expired.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		c.shards[i].mu.RLock()
		n += len(c.shards[i].m)
		c.shards[i].mu.RUnlock()
	}
	return n
}
