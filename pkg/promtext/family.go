package promtext

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// desc is what a metric family is declared with.
type desc struct {
	name, help string
	kind       string    // "counter" or "histogram"
	labels     []string  // label names, in the order With takes values
	order      []int     // indexes into labels, sorted by label name: the written order
	upper      []float64 // a histogram's bucket upper bounds, +Inf left out
}

func newDesc(kind, name, help string, labels []string) desc {
	d := desc{name: name, help: help, kind: kind, labels: slices.Clone(labels)}
	d.order = make([]int, len(labels))
	for i := range d.order {
		d.order[i] = i
	}
	slices.SortStableFunc(d.order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return d
}

// validate checks the names and buckets; Register calls it.
func (d *desc) validate() error {
	if !validName(d.name, true) {
		return errors.New("invalid metric name")
	}
	for i, l := range d.labels {
		switch {
		case !validName(l, false) || strings.HasPrefix(l, "__"):
			return fmt.Errorf("invalid label name %q", l)
		case slices.Contains(d.labels[:i], l):
			return fmt.Errorf("duplicate label name %q", l)
		case l == "le" && d.kind == "histogram":
			return errors.New(`a histogram cannot have a label "le"`)
		}
	}
	for i, u := range d.upper {
		if math.IsNaN(u) || (i > 0 && u <= d.upper[i-1]) {
			return fmt.Errorf("bucket bounds %v are not strictly increasing", d.upper)
		}
	}
	return nil
}

// validName reports whether s is a legacy Prometheus metric name (colons
// allowed) or label name.
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		ok := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
			i > 0 && '0' <= c && c <= '9' || metric && c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// series is one child's labels.
type series struct {
	values []string // label values in the written order: the sort key
	labels string   // `a="x",b="y"` escaped, no braces; "" without labels
}

// child is a series' value: *Counter or *Histogram.
type child interface {
	seriesOf() *series
	// appendSamples appends the child's sample lines.
	appendSamples(b []byte, name string) []byte
}

// family is a metric family's children, keyed by their label values each
// followed by 0xff (which valid UTF-8 never contains).
type family[T child] struct {
	desc
	mu       sync.RWMutex
	children map[string]T
	newChild func(series) T
}

func newFamily[T child](d desc, newChild func(series) T) *family[T] {
	return &family[T]{desc: d, children: make(map[string]T), newChild: newChild}
}

func (f *family[T]) descOf() *desc { return &f.desc }

// child returns the child with the label values fixed followed by values,
// creating it on first use. It panics when the number of values is not the
// number of labels, or a value is not valid UTF-8, as client_golang does.
func (f *family[T]) child(fixed, values []string) T {
	if len(fixed)+len(values) != len(f.labels) {
		panic(fmt.Sprintf("promtext: %s has %d labels, got %d values", f.name, len(f.labels), len(fixed)+len(values)))
	}
	var buf [128]byte
	key := appendKey(appendKey(buf[:0], fixed), values)
	f.mu.RLock()
	c, ok := f.children[string(key)]
	f.mu.RUnlock()
	if ok {
		return c
	}
	return f.add(string(key), slices.Concat(fixed, values))
}

// add is child's slow path.
func (f *family[T]) add(key string, values []string) T {
	for _, v := range values {
		if !utf8.ValidString(v) {
			panic(fmt.Sprintf("promtext: %s: label value %q is not valid UTF-8", f.name, v))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.children[key]; ok {
		return c
	}
	s := series{values: make([]string, len(values))}
	var b []byte
	for i, j := range f.order {
		s.values[i] = values[j]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.labels[j]...)
		b = append(b, `="`...)
		b = appendEscaped(b, values[j], true)
		b = append(b, '"')
	}
	s.labels = string(b)
	c := f.newChild(s)
	f.children[key] = c
	return c
}

func appendKey(b []byte, values []string) []byte {
	for _, v := range values {
		b = append(b, v...)
		b = append(b, 0xff)
	}
	return b
}

// appendText appends # HELP, # TYPE and the children's samples sorted by
// their label values; nothing when there are no children.
func (f *family[T]) appendText(b []byte) []byte {
	f.mu.RLock()
	cs := make([]T, 0, len(f.children))
	for _, c := range f.children {
		cs = append(cs, c)
	}
	f.mu.RUnlock()
	if len(cs) == 0 {
		return b
	}
	slices.SortFunc(cs, func(x, y T) int { return slices.Compare(x.seriesOf().values, y.seriesOf().values) })
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.kind...)
	b = append(b, '\n')
	for _, c := range cs {
		b = c.appendSamples(b, f.name)
	}
	return b
}
