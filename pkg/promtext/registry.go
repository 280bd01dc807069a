// Package promtext is Prometheus' text exposition format for binaries that
// must stay small: counters and fixed-bucket histograms, with or without
// labels, written as text format 0.0.4 by a Registry. It uses the standard
// library only.
//
// Updating a metric is allocation-free and safe from any goroutine. A
// labelled child is found with With (a map lookup under a read lock), so
// callers on a hot path look their children up once and keep them.
//
// The output matches what client_golang's registry and expfmt's text encoder
// write for the same metrics: families sorted by name, children by their
// label values, labels by name, values formatted as Go's strconv 'g' with
// +Inf, -Inf and NaN spelled as Prometheus spells them.
package promtext

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// ErrAlreadyRegistered is returned (wrapped) by Register when a metric of
// the same name is already registered.
var ErrAlreadyRegistered = errors.New("already registered")

// Metric is what a Registry holds: a *Counter or *Histogram made by
// NewCounter or NewHistogram, or a *CounterVec or *HistogramVec. Children
// of a vector and curried vectors are not registered themselves.
type Metric interface {
	family() writer
}

// writer is one metric family as the registry sees it.
type writer interface {
	descOf() *desc
	// appendText appends the family's text, nothing when it has no series.
	appendText(b []byte) []byte
}

// Registry is a set of metrics with distinct names, written together.
// The zero value is not usable; call NewRegistry.
type Registry struct {
	mu   sync.Mutex
	fams map[string]writer
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{fams: make(map[string]writer)}
}

// Register adds the metrics, all or none: it returns an error, and
// registers nothing, when one of them has an invalid name, label name or
// buckets, or has the name of a metric already registered (wrapping
// ErrAlreadyRegistered).
func (r *Registry) Register(ms ...Metric) error {
	fs := make([]writer, 0, len(ms))
	for _, m := range ms {
		f := m.family()
		if f == nil {
			return errors.New("register metric: a vector's child or a curried vector is registered through its vector")
		}
		if err := f.descOf().validate(); err != nil {
			return fmt.Errorf("register metric %q: %w", f.descOf().name, err)
		}
		fs = append(fs, f)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, f := range fs {
		name := f.descOf().name
		if _, dup := r.fams[name]; dup || slices.ContainsFunc(fs[:i], func(g writer) bool { return g.descOf().name == name }) {
			return fmt.Errorf("register metric %q: %w", name, ErrAlreadyRegistered)
		}
	}
	for _, f := range fs {
		r.fams[f.descOf().name] = f
	}
	return nil
}

// Unregister removes the metrics. A metric that is not registered, or
// whose name is registered to another metric, is left alone.
func (r *Registry) Unregister(ms ...Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range ms {
		f := m.family()
		if f == nil {
			continue
		}
		if r.fams[f.descOf().name] == f {
			delete(r.fams, f.descOf().name)
		}
	}
}

// WriteText writes every registered metric that has at least one series in
// the text exposition format 0.0.4, families sorted by name.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	fs := make([]writer, 0, len(r.fams))
	for _, f := range r.fams {
		fs = append(fs, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fs, func(a, b writer) int { return strings.Compare(a.descOf().name, b.descOf().name) })
	var b []byte
	for _, f := range fs {
		b = f.appendText(b)
	}
	_, err := w.Write(b)
	return err
}
