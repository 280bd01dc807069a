package xds

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// requestPool holds the buffers received frames are read into and SotW
// requests are copied into. gRPC's default pool has no tier between 32 KiB
// and 1 MiB and zeroes every buffer it hands out: the ACK of a sidecar
// subscribed to 1000 clusters (about 50 KiB of names) took a 1 MiB buffer
// and cleared it, a thousand times per endpoint change. Here every power
// of two from 1 KiB to 16 MiB is a tier, and buffers are not cleared: a
// frame read or a request's copy overwrites every byte that is read.
type requestPool struct {
	tiers [maxPoolTier - minPoolTier + 1]sync.Pool
}

const (
	minPoolTier = 10 // 1 KiB
	maxPoolTier = 24 // 16 MiB; larger buffers are allocated and dropped
)

var _ mem.BufferPool = (*requestPool)(nil)

// tier returns the tier index of a buffer of at least n bytes, or -1 when
// n is beyond the largest tier.
func tier(n int) int {
	e := max(bits.Len(uint(max(n, 1)-1)), minPoolTier)
	if e > maxPoolTier {
		return -1
	}
	return e - minPoolTier
}

// Get returns a buffer of length n whose contents are undefined.
func (p *requestPool) Get(n int) *[]byte {
	t := tier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minPoolTier))
	return &b
}

// Put returns a buffer from Get to its tier.
func (p *requestPool) Put(b *[]byte) {
	c := cap(*b)
	if c&(c-1) != 0 {
		return // not one of ours (beyond the largest tier)
	}
	if t := tier(c); t >= 0 && 1<<(t+minPoolTier) == c {
		p.tiers[t].Put(b)
	}
}
