package model

import (
	discoveryv1 "k8s.io/api/discovery/v1"
)

// podKeys are the pods that differ between two pod indexes, as endpoints
// find them: by namespace and name (an endpoint's targetRef) and by
// address. A pod replaced by a new object counts, whatever changed in it.
type podKeys struct {
	names map[nsName]struct{}
	ips   map[string]struct{}
}

// changedPodKeys returns the keys whose pod differs between a and b, both
// built indexes.
func changedPodKeys(a, b *podIndex) podKeys {
	return podKeys{names: diffKeys(a.names, b.names), ips: diffKeys(a.ips, b.ips)}
}

func diffKeys[K comparable](x, y map[K]*Pod) map[K]struct{} {
	out := map[K]struct{}{}
	for key, p := range y {
		if x[key] != p {
			out[key] = struct{}{}
		}
	}
	for key := range x {
		if _, ok := y[key]; !ok {
			out[key] = struct{}{}
		}
	}
	return out
}

// movedPods returns the keys of the pods gone and of those that came.
func movedPods(gone, came []*Pod) podKeys {
	k := podKeys{names: map[nsName]struct{}{}, ips: map[string]struct{}{}}
	for _, list := range [][]*Pod{gone, came} {
		for _, p := range list {
			k.names[nsName{p.Namespace, p.Name}] = struct{}{}
			for _, ip := range p.IPs {
				k.ips[ip] = struct{}{}
			}
		}
	}
	return k
}

func (k podKeys) empty() bool { return len(k.names) == 0 && len(k.ips) == 0 }

// readBy reports whether an endpoint of slices (of one namespace) may find
// a changed pod: by its targetRef, or by an address, where sliceEndpoints
// looks when the targetRef finds none.
func (k podKeys) readBy(slices []*discoveryv1.EndpointSlice) bool {
	if k.empty() {
		return false
	}
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				if _, ok := k.names[nsName{sl.Namespace, ep.TargetRef.Name}]; ok {
					return true
				}
			}
			for _, a := range ep.Addresses {
				if _, ok := k.ips[a]; ok {
					return true
				}
			}
		}
	}
	return false
}
