package xds

import (
	"slices"
	"sync"
	"unsafe"
	"weak"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// What a client holds of EDS or RDS (SotW watch.sent, delta watch.held) is
// a list sorted by name, never modified in place. An endpoint-only push
// changes a few entries of it; the lists here find them by binary search
// and share the result between connections, which held the same list
// before the push and get the same entries.

// searchRatio is how much longer held must be than the entries looked up
// in it for binary searches to beat one merge pass.
const searchRatio = 16

// changed returns the resources of next (sorted by name) that are not in
// held (sorted by name) with the same content.
func changed(held, next []*gen.Resource) []*gen.Resource {
	var out []*gen.Resource
	search := len(next)*searchRatio < len(held)
	i := 0
	for _, r := range next {
		if i < len(held) && held[i] == r {
			i++ // the very resource held (lists of one push context share them)
			continue
		}
		if search {
			j, _ := slices.BinarySearchFunc(held[i:], r.Name, byName)
			i += j
		} else {
			for i < len(held) && held[i].Name < r.Name {
				i++
			}
		}
		if i < len(held) && held[i].Name == r.Name && held[i].Hash == r.Hash {
			continue
		}
		out = append(out, r)
	}
	return out
}

// overlay returns held with the resources of upd (both sorted by name)
// replacing or joining those of the same name. held is not modified.
func overlay(held, upd []*gen.Resource) []*gen.Resource {
	if len(upd)*searchRatio < len(held) {
		out := make([]*gen.Resource, len(held), len(held)+len(upd))
		copy(out, held)
		for _, r := range upd {
			if i, ok := slices.BinarySearchFunc(out, r.Name, byName); ok {
				out[i] = r
			} else {
				out = slices.Insert(out, i, r)
			}
		}
		return out
	}
	out := make([]*gen.Resource, 0, len(held)+len(upd))
	for len(held) > 0 && len(upd) > 0 {
		switch {
		case held[0].Name < upd[0].Name:
			out, held = append(out, held[0]), held[1:]
		case held[0].Name > upd[0].Name:
			out, upd = append(out, upd[0]), upd[1:]
		default:
			out, held, upd = append(out, upd[0]), held[1:], upd[1:]
		}
	}
	return append(append(out, held...), upd...)
}

// overlays remembers recent overlay results: a thousand connections that
// held one shared list get one shared list back, not a thousand copies.
// Lists are referenced weakly: the table keeps nothing alive.
type overlays struct {
	mu sync.Mutex
	m  map[overlayKey]*overlayEntry
}

// overlayKey is held's identity (a weak pointer to its first element
// equals only one made from the same live array) and upd's content.
type overlayKey struct {
	held weak.Pointer[*gen.Resource]
	n    int
	upd  uint64
}

type overlayEntry struct {
	upd []*gen.Resource
	out weakList
}

// maxOverlays bounds the table; it starts over when full.
const maxOverlays = 256

// overlay is overlay(held, upd), shared with other callers of the same
// held list and equal updates.
func (o *overlays) overlay(held, upd []*gen.Resource) []*gen.Resource {
	if len(held) < minSharedBody {
		return overlay(held, upd)
	}
	k := overlayKey{held: weak.Make(&held[0]), n: len(held), upd: combinedHash(upd)}
	o.mu.Lock()
	e := o.m[k]
	o.mu.Unlock()
	if e != nil && sameResources(e.upd, upd) {
		if out := e.out.get(); out != nil {
			return out
		}
	}
	out := overlay(held, upd)
	o.mu.Lock()
	if o.m == nil || len(o.m) >= maxOverlays {
		o.m = map[overlayKey]*overlayEntry{}
	}
	o.m[k] = &overlayEntry{upd: upd, out: makeWeakList(out)}
	o.mu.Unlock()
	return out
}

// lists shares equal resource lists between connections: after a full
// push a thousand sidecars of a scope hold the same EDS list, and an
// endpoint-only push then overlays it once (overlays), not once each.
type lists struct {
	mu sync.Mutex
	m  map[listKey]sharedList
}

// sharedList is a list in use, and the last other list found equal to it:
// the sidecars of a scope bring one generated list, equal to the one they
// hold from the push before, which is compared once, not once each.
type sharedList struct {
	list, alias weakList
}

type listKey struct {
	hash uint64
	n    int
}

// maxLists bounds the table; it starts over when full.
const maxLists = 1024

// share returns a list equal to rs (names and contents), shared when one
// is still in use.
func (l *lists) share(rs []*gen.Resource) []*gen.Resource {
	if len(rs) < minSharedBody {
		return rs
	}
	k := listKey{hash: combinedHash(rs), n: len(rs)}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[k]
	if s := e.list.get(); s != nil {
		if a := e.alias.get(); a != nil && &a[0] == &rs[0] {
			return s
		}
		if sameResources(s, rs) {
			e.alias = makeWeakList(rs)
			l.m[k] = e
			return s
		}
	}
	if l.m == nil || len(l.m) >= maxLists {
		l.m = map[listKey]sharedList{}
	}
	l.m[k] = sharedList{list: makeWeakList(rs)}
	return rs
}

// weakList refers to a list without keeping it alive.
type weakList struct {
	first weak.Pointer[*gen.Resource]
	n     int
}

func makeWeakList(rs []*gen.Resource) weakList {
	if len(rs) == 0 {
		return weakList{}
	}
	return weakList{first: weak.Make(&rs[0]), n: len(rs)}
}

// get returns the list, or nil once it was collected.
func (w weakList) get() []*gen.Resource {
	p := w.first.Value()
	if p == nil {
		return nil
	}
	return unsafe.Slice(p, w.n)
}

// combinedHash fingerprints a list by its resources' content hashes.
func combinedHash(rs []*gen.Resource) uint64 {
	var h uint64 = 14695981039346656037
	for _, r := range rs {
		h = (h ^ r.Hash) * 1099511628211
	}
	return h
}

// diffKey identifies a held list and a generated one by their arrays:
// lists are never modified in place, and a push event keeps both alive.
type diffKey struct {
	held, next   **gen.Resource
	nHeld, nNext int
}

func firstOf(rs []*gen.Resource) **gen.Resource {
	if len(rs) == 0 {
		return nil
	}
	return &rs[0]
}

// diffMemo shares, within one push event, a result computed from a held
// list and a generated one: after a full push a thousand sidecars of a
// scope hold one shared list (lists.share) and are given one shared list,
// and comparing them once replaces a thousand merges of two thousand names.
type diffMemo[T any] struct {
	mu sync.Mutex
	m  map[diffKey]T
}

// get returns f(held, next), from the memo when this event computed it
// for the same lists. Short lists are computed each time.
func (d *diffMemo[T]) get(held, next []*gen.Resource, f func(held, next []*gen.Resource) T) T {
	if max(len(held), len(next)) < minSharedBody {
		return f(held, next)
	}
	k := diffKey{firstOf(held), firstOf(next), len(held), len(next)}
	d.mu.Lock()
	v, ok := d.m[k]
	d.mu.Unlock()
	if ok {
		return v
	}
	v = f(held, next)
	d.mu.Lock()
	if d.m == nil {
		d.m = map[diffKey]T{}
	}
	d.m[k] = v
	d.mu.Unlock()
	return v
}

// changed is changed(held, next), shared by the connections of ev; ev may
// be nil (an answer to a request).
func (ev *pushEvent) changed(held, next []*gen.Resource) []*gen.Resource {
	if ev == nil {
		return changed(held, next)
	}
	return ev.changedMemo.get(held, next, changed)
}

// missing is missing(held, next), shared by the connections of ev; the
// caller must not modify it.
func (ev *pushEvent) missing(held, next []*gen.Resource) []string {
	if ev == nil {
		return missing(held, next)
	}
	return ev.missingMemo.get(held, next, missing)
}
