package model

import (
	"cmp"
	"maps"
	"strings"
	"sync/atomic"
)

// podIndex finds pods by namespace and name and by address. One built
// from a list of pods (indexPods) holds them all. One patched from
// another (patch) holds only what changed since its root, the built index
// under it, with nil for a pod gone: a rollout's new pod then costs its
// own entries rather than an index of every pod in the mesh.
type podIndex struct {
	names map[nsName]*Pod
	ips   map[string]*Pod
	// root is the built index under a patched one; nil for a built one.
	root *podIndex
	// shared are the addresses more than one pod holds in a built index
	// (host-network pods): a change of one of them builds the index again.
	shared map[string]bool
	// list is the list of pods the index holds; sorted, when it is sorted
	// strictly by namespace and name, as the kube registry keeps it. Only
	// an index of a sorted list can be patched.
	list   []*Pod
	sorted bool
	// id tells indexes apart without keeping them: see PushContext.podsFrom.
	id uint64
}

// maxPodPatch bounds the entries a patched index holds over its root;
// past it the index is built again.
const maxPodPatch = 512

var podIndexIDs atomic.Uint64

// indexPods builds the index of pods, noting whether the list is sorted
// and which addresses more than one pod holds.
func indexPods(pods []*Pod) *podIndex {
	ix := &podIndex{names: make(map[nsName]*Pod, len(pods)), ips: make(map[string]*Pod, len(pods)),
		list: pods, sorted: true, id: podIndexIDs.Add(1)}
	for i, p := range pods {
		ix.names[nsName{p.Namespace, p.Name}] = p
		for _, ip := range p.IPs {
			if q := ix.ips[ip]; q != nil && q != p {
				if ix.shared == nil {
					ix.shared = map[string]bool{}
				}
				ix.shared[ip] = true
			}
			ix.ips[ip] = p
		}
		if i > 0 && comparePods(pods[i-1], p) >= 0 {
			ix.sorted = false
		}
	}
	return ix
}

// byName returns the pod named ns/name, or nil.
func (ix *podIndex) byName(ns, name string) *Pod {
	k := nsName{ns, name}
	if p, ok := ix.names[k]; ok || ix.root == nil {
		return p
	}
	return ix.root.names[k]
}

// byIP returns the pod at address ip, or nil.
func (ix *podIndex) byIP(ip string) *Pod {
	if p, ok := ix.ips[ip]; ok || ix.root == nil {
		return p
	}
	return ix.root.ips[ip]
}

// flat returns ix as a built index holds it, every pod in its own maps.
func (ix *podIndex) flat() *podIndex {
	if ix.root == nil {
		return ix
	}
	out := &podIndex{names: maps.Clone(ix.root.names), ips: maps.Clone(ix.root.ips), id: ix.id}
	for k, p := range ix.names {
		if out.names[k] = p; p == nil {
			delete(out.names, k)
		}
	}
	for ip, p := range ix.ips {
		if out.ips[ip] = p; p == nil {
			delete(out.ips, ip)
		}
	}
	return out
}

// next returns the index of pods, which follows ix's list, and the keys
// of the pods that differ between the two. It patches ix when both lists
// are sorted and the changes are few and touch no address two pods hold;
// otherwise it builds the index again and compares the two whole.
func (ix *podIndex) next(pods []*Pod) (*podIndex, podKeys) {
	if ix.sorted {
		if gone, came, ok := diffPods(ix.list, pods); ok {
			if out := ix.patch(gone, came, pods); out != nil {
				return out, movedPods(gone, came)
			}
		}
	}
	out := indexPods(pods)
	return out, changedPodKeys(ix.flat(), out)
}

// patch returns ix without the pods gone and with those that came, or
// nil when that needs the index built again.
func (ix *podIndex) patch(gone, came, list []*Pod) *podIndex {
	root, n := ix, len(gone)+len(came)
	if ix.root != nil {
		root, n = ix.root, n+len(ix.names)
	}
	out := &podIndex{root: root, list: list, sorted: true, id: podIndexIDs.Add(1)}
	if n > maxPodPatch {
		return nil
	}
	out.names, out.ips = make(map[nsName]*Pod, n), make(map[string]*Pod, n)
	if ix.root != nil {
		maps.Copy(out.names, ix.names)
		maps.Copy(out.ips, ix.ips)
	}
	for _, p := range gone {
		if !out.set(p, nil, root.shared) {
			return nil
		}
	}
	for _, p := range came {
		if !out.set(p, p, root.shared) {
			return nil
		}
	}
	return out
}

// set records p's name and addresses as leading to pod, p itself or nil
// for p gone. It reports false when something else is there: another pod
// of p's name or at one of its addresses, or an address more than one pod
// holds in the root index.
func (ix *podIndex) set(p, pod *Pod, shared map[string]bool) bool {
	was := p // what p's keys lead to before
	if pod != nil {
		was = nil
	}
	k := nsName{p.Namespace, p.Name}
	if ix.byName(k.ns, k.name) != was {
		return false
	}
	ix.names[k] = pod
	for _, ip := range p.IPs {
		// An address p lists twice already leads to pod.
		if q := ix.byIP(ip); shared[ip] || (q != was && q != pod) {
			return false
		}
		ix.ips[ip] = pod
	}
	return true
}

// diffPods returns the pods of a, a list sorted strictly by namespace and
// name, that b does not hold, and those b holds that a does not; a pod
// written again (a new object) is in both. ok is false when b is not
// sorted likewise. Pods b shares with a are compared as pointers, so a
// change among thousands costs a walk of pointers and a few names.
func diffPods(a, b []*Pod) (gone, came []*Pod, ok bool) {
	var last *Pod // b's pod before the one at j
	inRun := false
	i := 0
	for j := 0; j < len(b); {
		p := b[j]
		if i < len(a) && a[i] == p {
			// A run of pods both hold is sorted as a is; only its first
			// needs comparing with the pod before it.
			if !inRun && last != nil && comparePods(last, p) >= 0 {
				return nil, nil, false
			}
			inRun, last = true, p
			i, j = i+1, j+1
			continue
		}
		inRun = false
		if last != nil && comparePods(last, p) >= 0 {
			return nil, nil, false
		}
		if i < len(a) {
			c := comparePods(a[i], p)
			if c <= 0 {
				gone = append(gone, a[i])
				i++
			}
			if c < 0 {
				continue
			}
		}
		came = append(came, p)
		last = p
		j++
	}
	return append(gone, a[i:]...), came, true
}

// comparePods orders pods by namespace, then name.
func comparePods(a, b *Pod) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}
