package promtext

import (
	"fmt"
	"sync/atomic"
)

// Counter is a count that only goes up. Its methods are safe for
// concurrent use and do not allocate.
type Counter struct {
	n   atomic.Uint64
	s   series
	fam writer // the family of a counter made by NewCounter; nil for a child
}

var _ Metric = (*Counter)(nil)

// NewCounter returns an unlabelled counter named name, to register.
func NewCounter(name, help string) *Counter {
	f := newFamily(newDesc("counter", name, help, nil), newCounter)
	c := f.child(nil, nil)
	c.fam = f
	return c
}

func newCounter(s series) *Counter { return &Counter{s: s} }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.n.Load() }

func (c *Counter) family() writer    { return c.fam }
func (c *Counter) seriesOf() *series { return &c.s }

func (c *Counter) appendSamples(b []byte, name string) []byte {
	return appendSample(b, name, "", c.s.labels, nil, float64(c.n.Load()))
}

// CounterVec is a family of counters told apart by label values.
type CounterVec struct {
	f     *family[*Counter]
	fixed []string // leading label values fixed by Curry
}

var _ Metric = (*CounterVec)(nil)

// NewCounterVec returns a counter family named name with the given label
// names, to register. It has no series until With is first called.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{f: newFamily(newDesc("counter", name, help, labels), newCounter)}
}

// With returns the counter with the given label values (in the order of
// the vector's label names, after those fixed by Curry), creating it on
// first use. Keep the result where it is used often: the lookup takes a
// read lock. With panics when the number of values is wrong or a value is
// not valid UTF-8.
func (v *CounterVec) With(values ...string) *Counter { return v.f.child(v.fixed, values) }

// Curry returns a view of the vector with the next label values fixed:
// its With takes only the values of the labels after them. Curry panics
// when given more values than there are labels left.
func (v *CounterVec) Curry(values ...string) *CounterVec {
	if n := len(v.fixed) + len(values); n > len(v.f.labels) {
		panic(fmt.Sprintf("promtext: %s has %d labels, curried with %d values", v.f.name, len(v.f.labels), n))
	}
	// A fresh slice: curried views of one vector never share fixed's array.
	fixed := append(append(make([]string, 0, len(v.fixed)+len(values)), v.fixed...), values...)
	return &CounterVec{f: v.f, fixed: fixed}
}

func (v *CounterVec) family() writer {
	if len(v.fixed) > 0 {
		return nil
	}
	return v.f
}
