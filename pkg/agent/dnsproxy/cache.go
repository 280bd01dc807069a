package dnsproxy

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/miekg/dns"
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

// put caches resp, an upstream answer to the question in key, if it is
// cacheable (RFC 2308 for negative answers). It reports whether it did.
func (c *cache) put(key []byte, resp *dns.Msg, now time.Duration) bool {
	if c == nil {
		return false
	}
	ttl, ok := cacheTTL(resp)
	if !ok {
		return false
	}
	ttl = min(ttl, c.maxTTL)
	m := resp.Copy()
	m.Id, m.Authoritative, m.RecursionAvailable = 0, false, true
	m.Question[0].Name = canonicalName(m.Question[0].Name)
	m.Extra = withoutOPT(m.Extra)
	a, err := packAnswer(m, 0, true)
	if err != nil {
		return false
	}
	c.putAnswer(key, a, ttl, now)
	return true
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

// cacheTTL is how long resp may be cached: the smallest record TTL of a
// positive answer; for NXDOMAIN and NODATA the SOA's TTL capped by its
// MINIMUM (RFC 2308 section 5). Other answers are not cached.
func cacheTTL(resp *dns.Msg) (time.Duration, bool) {
	if resp.Truncated || len(resp.Question) != 1 {
		return 0, false
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return 0, false
	}
	if resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 {
		ttl := ^uint32(0)
		for _, sec := range [][]dns.RR{resp.Answer, resp.Ns, resp.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype != dns.TypeOPT {
					ttl = min(ttl, rr.Header().Ttl)
				}
			}
		}
		return time.Duration(ttl) * time.Second, ttl > 0
	}
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			ttl := min(soa.Hdr.Ttl, soa.Minttl)
			return time.Duration(ttl) * time.Second, ttl > 0
		}
	}
	return 0, false
}

// withoutOPT returns rrs without OPT records.
func withoutOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}
