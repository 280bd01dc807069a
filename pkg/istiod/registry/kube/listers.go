package kube

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// listers read the informer caches; the stores of Istio kinds are nil when
// their CRD is not installed.
type listers struct {
	services, slices, pods                                    cache.Store
	serviceEntries, workloadEntries, virtualServices          cache.Store
	destinationRules, sidecars                                cache.Store
	peerAuthentications, authorizationPolicies, requestAuthNs cache.Store
}

// kinds are the kinds the listers read, in the order problems are listed.
var kinds = []model.Kind{model.KindService, model.KindEndpointSlice, model.KindPod, model.KindServiceEntry,
	model.KindWorkloadEntry, model.KindVirtualService, model.KindDestinationRule, model.KindSidecar,
	model.KindPeerAuthentication, model.KindAuthorizationPolicy, model.KindRequestAuthentication}

// maxPatched bounds the objects of one kind patched into the inputs one by
// one; past it the kind is listed again whole.
const maxPatched = 256

// changes are the objects of one kind that changed since the inputs were
// built, by store key; all lists the kind again.
type changes struct {
	all  bool
	keys map[string]struct{}
}

// everyKind is a change of every object of every kind: the first build.
func everyKind() map[model.Kind]*changes {
	dirty := map[model.Kind]*changes{}
	for _, k := range kinds {
		dirty[k] = &changes{all: true}
	}
	return dirty
}

// add records obj, an object or a deleted-final-state tombstone.
func (c *changes) add(obj any) {
	if c.all {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil || len(c.keys) >= maxPatched {
		c.all, c.keys = true, nil
		return
	}
	if c.keys == nil {
		c.keys = map[string]struct{}{}
	}
	c.keys[key] = struct{}{}
}

// problems are the objects that failed validation, by kind and store key.
type problems map[model.Kind]map[string]error

// list returns every problem, by kind, then by key.
func (p problems) list() []error {
	var out []error
	for _, k := range kinds {
		for _, key := range slices.Sorted(maps.Keys(p[k])) {
			out = append(out, p[k][key])
		}
	}
	return out
}

// build returns the inputs: prev's (none when nil), with the objects in
// dirty read again from the caches. Each kind is kept sorted by namespace
// and name, since a cache lists in no order, so an object that did not
// change keeps its place and its pointer; a changed object is patched into
// a copy of prev's list, and a kind with too many changes is listed again.
// Invalid objects are left out and recorded in probs.
func (l *listers) build(prev *model.Inputs, dirty map[model.Kind]*changes, probs problems) *model.Inputs {
	in := &model.Inputs{}
	if prev != nil {
		*in = *prev
	}
	read(model.KindService, l.services, &in.Services, accepted, dirty, probs)
	read(model.KindEndpointSlice, l.slices, &in.EndpointSlices, accepted, dirty, probs)
	read(model.KindPod, l.pods, &in.Pods, cachedPodOf, dirty, probs)
	read(model.KindServiceEntry, l.serviceEntries, &in.ServiceEntries, accepted, dirty, probs)
	read(model.KindWorkloadEntry, l.workloadEntries, &in.WorkloadEntries, accepted, dirty, probs)
	read(model.KindVirtualService, l.virtualServices, &in.VirtualServices, accepted, dirty, probs)
	read(model.KindDestinationRule, l.destinationRules, &in.DestinationRules, accepted, dirty, probs)
	read(model.KindSidecar, l.sidecars, &in.Sidecars, accepted, dirty, probs)
	read(model.KindPeerAuthentication, l.peerAuthentications, &in.PeerAuthentications, accepted, dirty, probs)
	read(model.KindAuthorizationPolicy, l.authorizationPolicies, &in.AuthorizationPolicies, accepted, dirty, probs)
	read(model.KindRequestAuthentication, l.requestAuthNs, &in.RequestAuthentications, accepted, dirty, probs)
	return in
}

// read brings kind's list in dst up to date with store when it is dirty.
// use checks an object and returns what the inputs keep of it. A nil store
// (its CRD not installed) lists nothing.
func read[T, U model.Named](kind model.Kind, store cache.Store, dst *[]U, use func(T) (U, error), dirty map[model.Kind]*changes, probs problems) {
	ch := dirty[kind]
	if store == nil || ch == nil {
		return
	}
	if ch.all {
		*dst, probs[kind] = listAll(kind, store, use)
		return
	}
	if probs[kind] == nil {
		probs[kind] = map[string]error{}
	}
	*dst = patch(kind, store, *dst, ch.keys, use, probs[kind])
}

// listAll lists store whole, sorted, with its invalid objects' problems.
func listAll[T, U model.Named](kind model.Kind, store cache.Store, use func(T) (U, error)) ([]U, map[string]error) {
	objs := store.List()
	out := make([]U, 0, len(objs))
	p := map[string]error{}
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			continue
		}
		u, err := use(t)
		if err != nil {
			p[t.GetNamespace()+"/"+t.GetName()] = problem(kind, t, err)
			continue
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b U) int { return compareNamed(a, b.GetNamespace(), b.GetName()) })
	return out, p
}

// patch returns a copy of the sorted list old with the objects of keys as
// store now holds them: replaced, inserted in order, or removed when gone
// or invalid. p is the kind's problems, kept up to date.
func patch[T, U model.Named](kind model.Kind, store cache.Store, old []U, keys map[string]struct{}, use func(T) (U, error), p map[string]error) []U {
	out := make([]U, len(old), len(old)+len(keys))
	copy(out, old)
	for key := range keys {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		i, found := slices.BinarySearchFunc(out, key, func(u U, _ string) int { return compareNamed(u, ns, name) })
		var u U
		keep := false
		delete(p, key)
		if obj, ok, err := store.GetByKey(key); err == nil && ok {
			if t, isT := obj.(T); isT {
				v, err := use(t)
				if err != nil {
					p[key] = problem(kind, t, err)
				} else {
					u, keep = v, true
				}
			}
		}
		switch {
		case keep && found:
			out[i] = u
		case keep:
			out = slices.Insert(out, i, u)
		case found:
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// compareNamed orders objects by namespace, then name.
func compareNamed[U model.Named](u U, ns, name string) int {
	return cmp.Or(strings.Compare(u.GetNamespace(), ns), strings.Compare(u.GetName(), name))
}

func problem(kind model.Kind, o model.Named, err error) error {
	return fmt.Errorf("%s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
}

// accepted keeps an object whole once validation accepts it.
func accepted[T model.Named](o T) (T, error) { return o, validation.Accept(any(o)) }

// cachedPodOf keeps what istiod reads of a pod; its validation ran when the
// informer cached it.
func cachedPodOf(c *cachedPod) (*model.Pod, error) { return &c.pod, c.invalid }
