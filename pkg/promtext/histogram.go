package promtext

import (
	"math"
	"slices"
	"sort"
	"sync/atomic"
)

// Histogram counts observations in fixed buckets and keeps their sum.
// Observe is safe for concurrent use and does not allocate. A scrape sees
// each bucket's count atomically; _count is the sum of the buckets, and
// _sum may lag an observation in flight.
type Histogram struct {
	upper  []float64       // the family's bounds, +Inf left out
	counts []atomic.Uint64 // per bucket (not cumulative); the last is +Inf's
	sum    atomic.Uint64   // float64 bits
	s      series
	fam    writer // the family of a histogram made by NewHistogram; nil for a child
}

var _ Metric = (*Histogram)(nil)

// NewHistogram returns an unlabelled histogram named name with the given
// bucket upper bounds (strictly increasing; a last +Inf is implied), to
// register.
func NewHistogram(name, help string, buckets []float64) *Histogram {
	f := newHistogramFamily(name, help, buckets, nil)
	h := f.child(nil, nil)
	h.fam = f
	return h
}

func newHistogramFamily(name, help string, buckets []float64, labels []string) *family[*Histogram] {
	d := newDesc("histogram", name, help, labels)
	d.upper = slices.Clone(buckets)
	if n := len(d.upper); n > 0 && math.IsInf(d.upper[n-1], +1) {
		d.upper = d.upper[:n-1]
	}
	return newFamily(d, func(s series) *Histogram {
		return &Histogram{upper: d.upper, counts: make([]atomic.Uint64, len(d.upper)+1), s: s}
	})
}

// Observe records v: in the first bucket whose bound is at least v (NaN
// and values above every bound in +Inf's), and in the sum.
func (h *Histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.upper, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (h *Histogram) family() writer    { return h.fam }
func (h *Histogram) seriesOf() *series { return &h.s }

func (h *Histogram) appendSamples(b []byte, name string) []byte {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		le := math.Inf(+1)
		if i < len(h.upper) {
			le = h.upper[i]
		}
		b = appendSample(b, name, "_bucket", h.s.labels, &le, float64(n))
	}
	b = appendSample(b, name, "_sum", h.s.labels, nil, math.Float64frombits(h.sum.Load()))
	return appendSample(b, name, "_count", h.s.labels, nil, float64(n))
}

// HistogramVec is a family of histograms told apart by label values, all
// with the same buckets.
type HistogramVec struct {
	f *family[*Histogram]
}

var _ Metric = (*HistogramVec)(nil)

// NewHistogramVec returns a histogram family named name with the given
// buckets (as NewHistogram's) and label names, to register. It has no
// series until With is first called.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	return &HistogramVec{f: newHistogramFamily(name, help, buckets, labels)}
}

// With returns the histogram with the given label values (in the order of
// the vector's label names), creating it on first use. Keep the result
// where it is used often. With panics when the number of values is wrong
// or a value is not valid UTF-8.
func (v *HistogramVec) With(values ...string) *Histogram { return v.f.child(nil, values) }

func (v *HistogramVec) family() writer { return v.f }
