package model

import (
	"maps"
	"slices"
)

// selectorIndex finds the Kubernetes services whose selector matches a
// workload's labels by looking up the workload's label pairs, where a
// scan tried every service of the mesh for every proxy of a push. Each
// service is filed under one pair of its selector (the first key in
// order): a workload it selects carries that pair.
type selectorIndex map[selectorPair][]int32 // positions in Services, ascending

type selectorPair struct{ ns, key, value string }

// selectorIndexes reads configuration alone.
var selectorIndexes = NewMemo[struct{}, selectorIndex]()

// KubeServicesSelecting returns the Kubernetes services of namespace ns
// whose selector matches labels, in the order of Services.
func (pc *PushContext) KubeServicesSelecting(ns string, labels map[string]string) []*Service {
	if len(labels) == 0 {
		return nil
	}
	x := selectorIndexes.Get(pc, struct{}{}, func() selectorIndex {
		x := selectorIndex{}
		for i, svc := range pc.Services {
			if svc.Registry != RegistryKubernetes || len(svc.Selector) == 0 {
				continue
			}
			k := slices.Min(slices.Collect(maps.Keys(svc.Selector)))
			p := selectorPair{ns: svc.Namespace, key: k, value: svc.Selector[k]}
			x[p] = append(x[p], int32(i))
		}
		return x
	})
	var at []int32
	for k, v := range labels {
		at = append(at, x[selectorPair{ns: ns, key: k, value: v}]...)
	}
	slices.Sort(at) // a service is filed once, so found once
	var out []*Service
	for _, i := range at {
		if svc := pc.Services[i]; LabelsMatch(svc.Selector, labels) {
			out = append(out, svc)
		}
	}
	return out
}
