// Package bufpool is a pool of byte buffers in power-of-two tiers from
// 1 KiB to 16 MiB, so that a buffer handed out is at most twice what was
// asked for, whatever the size. istiod's xDS server copies state-of-the-world
// requests into its buffers, and the gRPC server reads frames into them.
//
// Buffers are not cleared: whoever takes one overwrites every byte it
// reads. gRPC's default pool, by contrast, has no tier between 32 KiB and
// 1 MiB and zeroes every buffer it hands out.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Tiered is the pool; its zero value is ready to use.
type Tiered struct {
	tiers [maxTier - minTier + 1]sync.Pool
}

const (
	minTier = 10 // 1 KiB
	maxTier = 24 // 16 MiB; larger buffers are allocated and dropped
)

var _ mem.BufferPool = (*Tiered)(nil)

// tier returns the tier index of a buffer of at least n bytes, or -1 when
// n is beyond the largest tier.
func tier(n int) int {
	e := max(bits.Len(uint(max(n, 1)-1)), minTier)
	if e > maxTier {
		return -1
	}
	return e - minTier
}

// Get returns a buffer of length n whose contents are undefined.
func (p *Tiered) Get(n int) *[]byte {
	t := tier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minTier))
	return &b
}

// Put returns a buffer from Get to its tier.
func (p *Tiered) Put(b *[]byte) {
	c := cap(*b)
	if c&(c-1) != 0 {
		return // not one of ours (beyond the largest tier)
	}
	if t := tier(c); t >= 0 && 1<<(t+minTier) == c {
		p.tiers[t].Put(b)
	}
}
