package model

import (
	"maps"
	"sync"
	"sync/atomic"
)

// A Memo is one kind of value cached in each push context: values of type
// V under keys of type K, each built once per push and shared by every
// proxy that asks. A Memo declares what its values are built from.
// Configuration (services, Istio configuration) they may all read: a push
// context with other configuration starts with nothing cached. Pods they
// may not: pods change without a full push, so what a value takes from a
// proxy's pod (its labels) must be part of its key. What
// they read of endpoints is declared when the Memo is made, and decides
// what Inherit keeps across an endpoint-only change.
//
// Declare Memos as package variables; the zero Memo is not usable.
type Memo[K comparable, V any] struct {
	id int
	// reads reports whether the value under key reads svc's endpoints;
	// nil: no value reads endpoints (unless host is set).
	reads func(key K, svc *Service) bool
	// host, when set, names the one host whose endpoints the value under
	// key reads.
	host func(key K) string
}

// memoIDs numbers Memos: a push context keeps its tables in a slice.
var memoIDs atomic.Int32

// NewMemo declares a memo whose values are built from configuration alone,
// so an endpoint-only change keeps them.
func NewMemo[K comparable, V any]() *Memo[K, V] {
	return &Memo[K, V]{id: int(memoIDs.Add(1)) - 1}
}

// NewEndpointMemo declares a memo whose value under key also reads the
// endpoints of each service svc for which reads(key, svc) is true: an
// endpoint change of such a service drops the value, and the values that
// read none of the changed services are kept.
func NewEndpointMemo[K comparable, V any](reads func(key K, svc *Service) bool) *Memo[K, V] {
	m := NewMemo[K, V]()
	m.reads = reads
	return m
}

// NewHostMemo declares a memo whose value under key reads the endpoints of
// one host, host(key), beside configuration. It is NewEndpointMemo for
// that common case, and cheaper to inherit when many values are cached.
func NewHostMemo[K comparable, V any](host func(key K) string) *Memo[K, V] {
	m := NewMemo[K, V]()
	m.host = host
	return m
}

// Get returns the value cached under key in pc, building it with build
// the first time. Concurrent callers for one key wait for one build.
func (m *Memo[K, V]) Get(pc *PushContext, key K, build func() V) V {
	pc.memoMu.Lock()
	t := m.table(pc)
	e := t.entries[key]
	if e == nil {
		e = &memoEntry[V]{}
		t.entries[key] = e
	}
	pc.memoMu.Unlock()
	e.once.Do(func() { e.v = build() })
	return e.v
}

// table returns m's table in pc, making it; pc.memoMu must be held.
func (m *Memo[K, V]) table(pc *PushContext) *memoTable[K, V] {
	if m.id >= len(pc.memos) {
		pc.memos = append(pc.memos, make([]memoStore, m.id+1-len(pc.memos))...)
	}
	t, _ := pc.memos[m.id].(*memoTable[K, V])
	if t == nil {
		t = &memoTable[K, V]{memo: m, entries: map[K]*memoEntry[V]{}}
		pc.memos[m.id] = t
	}
	return t
}

// memoStore is a memo's table seen without its types.
type memoStore interface {
	// inheritInto adds to pc the entries still valid after an endpoint
	// change of the changed services (hosts: their names); pc.memoMu must
	// be held.
	inheritInto(pc *PushContext, changed []*Service, hosts map[string]struct{})
}

type memoTable[K comparable, V any] struct {
	memo    *Memo[K, V]
	entries map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	once sync.Once
	v    V
}

func (t *memoTable[K, V]) inheritInto(pc *PushContext, changed []*Service, hosts map[string]struct{}) {
	reads, host := t.memo.reads, t.memo.host
	stale := func(k K, _ *memoEntry[V]) bool {
		if host != nil {
			if _, ok := hosts[host(k)]; ok {
				return true
			}
		}
		if reads != nil {
			for _, svc := range changed {
				if reads(k, svc) {
					return true
				}
			}
		}
		return false
	}
	dst := t.memo.table(pc)
	if len(dst.entries) == 0 {
		// The usual case, pc having built nothing yet: one copy sized at
		// once, then drop what is stale.
		dst.entries = maps.Clone(t.entries)
		if reads != nil || host != nil {
			maps.DeleteFunc(dst.entries, stale)
		}
		return
	}
	for k, e := range t.entries {
		if _, ok := dst.entries[k]; !ok && !stale(k, e) {
			dst.entries[k] = e // not built in pc yet
		}
	}
}

// Inherit carries into pc the cached values of prev that change leaves
// valid. Only an endpoint-only change (pc and prev with the same
// configuration) leaves anything valid: the values whose Memo says they
// read none of the changed services' endpoints. Call it before pc is
// shared; values pc has built already are kept.
func (pc *PushContext) Inherit(prev *PushContext, change Change) {
	if prev == nil || prev == pc || change.Full || prev.ConfigHash != pc.ConfigHash {
		return
	}
	changed := make([]*Service, 0, len(change.Hosts))
	for h := range change.Hosts {
		svc := pc.ServiceByHost[h]
		if svc == nil {
			svc = &Service{Hostname: h} // not reachable: same configuration, same services
		}
		changed = append(changed, svc)
	}
	prev.memoMu.Lock()
	defer prev.memoMu.Unlock()
	pc.memoMu.Lock()
	defer pc.memoMu.Unlock()
	for _, t := range prev.memos {
		if t != nil {
			t.inheritInto(pc, changed, change.Hosts)
		}
	}
}
