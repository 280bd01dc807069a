package xds

import (
	"slices"
	"sync"
	"unsafe"

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
type overlays struct {
	mu sync.Mutex
	m  map[overlayKey]*overlayEntry
}

// overlayKey is held's identity (its array and length) and upd's content.
// An entry keeps its held list alive, so no other list can take the same
// address while the entry exists.
type overlayKey struct {
	held *(*gen.Resource)
	n    int
	upd  uint64
}

type overlayEntry struct {
	held, upd, out []*gen.Resource
}

// maxOverlays bounds the table; it starts over when full.
const maxOverlays = 256

// overlay is overlay(held, upd), shared with other callers of the same
// held list and equal updates.
func (o *overlays) overlay(held, upd []*gen.Resource) []*gen.Resource {
	if len(held) < minSharedBody {
		return overlay(held, upd)
	}
	var h uint64 = 14695981039346656037
	for _, r := range upd {
		h = (h ^ r.Hash) * 1099511628211
	}
	k := overlayKey{held: unsafe.SliceData(held), n: len(held), upd: h}
	o.mu.Lock()
	e := o.m[k]
	o.mu.Unlock()
	if e != nil && sameResources(e.upd, upd) {
		return e.out
	}
	out := overlay(held, upd)
	o.mu.Lock()
	if o.m == nil || len(o.m) >= maxOverlays {
		o.m = map[overlayKey]*overlayEntry{}
	}
	o.m[k] = &overlayEntry{held: held, upd: upd, out: out}
	o.mu.Unlock()
	return out
}
