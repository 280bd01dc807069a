package model

import (
	"strings"

	networking "istio.io/client-go/pkg/apis/networking/v1"
)

// hostIndex finds the objects of a list (VirtualServices, DestinationRules)
// whose host patterns match a host name, by looking the name up rather than
// trying every object: a scope asks once per visible service, so trying
// every object made a scope cost services x objects host comparisons.
type hostIndex struct {
	// exact holds the positions of the objects naming each host, in
	// ascending order (a position repeats when an object names a host
	// twice).
	exact map[string][]int32
	// wild holds the patterns "*" and "*.suffix" with their objects'
	// positions, in ascending order of position.
	wild []wildHost
}

type wildHost struct {
	pattern string
	at      int32
}

// newHostIndex indexes n objects; hosts(i) are object i's patterns, short
// names already resolved.
func newHostIndex(n int, hosts func(i int) []string) *hostIndex {
	x := &hostIndex{exact: map[string][]int32{}}
	for i := range n {
		for _, h := range hosts(i) {
			if h == "*" || strings.HasPrefix(h, "*.") {
				x.wild = append(x.wild, wildHost{pattern: h, at: int32(i)})
			} else {
				x.exact[h] = append(x.exact[h], int32(i))
			}
		}
	}
	return x
}

// each calls yield with the position of every object with a pattern that
// matches host (HostMatches), in ascending order, until yield returns
// false.
func (x *hostIndex) each(host string, yield func(i int) bool) {
	exact, wild := x.exact[host], x.wild
	last := int32(-1)
	for len(exact) > 0 || len(wild) > 0 {
		var at int32
		switch {
		case len(wild) == 0 || (len(exact) > 0 && exact[0] <= wild[0].at):
			at, exact = exact[0], exact[1:]
		default:
			w := wild[0]
			wild = wild[1:]
			if !HostMatches(w.pattern, host) {
				continue
			}
			at = w.at
		}
		if at == last {
			continue // the object matched through another of its patterns
		}
		last = at
		if !yield(int(at)) {
			return
		}
	}
}

// configIndex is the host indexes of a push context's VirtualServices and
// DestinationRules; it reads configuration alone.
type configIndex struct {
	virtualServices, destinationRules *hostIndex
}

var configIndexes = NewMemo[struct{}, *configIndex]()

func (pc *PushContext) configIndex() *configIndex {
	return configIndexes.Get(pc, struct{}{}, func() *configIndex {
		return &configIndex{
			virtualServices: newHostIndex(len(pc.VirtualServices), func(i int) []string {
				vs := pc.VirtualServices[i]
				out := make([]string, 0, len(vs.Spec.GetHosts()))
				for _, h := range vs.Spec.GetHosts() {
					out = append(out, ResolveHostIn(h, vs.Namespace, pc.Domain))
				}
				return out
			}),
			destinationRules: newHostIndex(len(pc.DestinationRules), func(i int) []string {
				dr := pc.DestinationRules[i]
				return []string{ResolveHostIn(dr.Spec.GetHost(), dr.Namespace, pc.Domain)}
			}),
		}
	})
}

// virtualService returns the first VirtualService (oldest first) exported
// to ns with a host that matches svc.
func (pc *PushContext) virtualService(ns string, svc *Service) *networking.VirtualService {
	var found *networking.VirtualService
	pc.configIndex().virtualServices.each(svc.Hostname, func(i int) bool {
		vs := pc.VirtualServices[i]
		if exportedTo(vs.Spec.GetExportTo(), vs.Namespace, ns) {
			found = vs
			return false
		}
		return true
	})
	return found
}

// destinationRule picks the rule for svc as seen from ns: the proxy's
// namespace first, then the service's, then any other exported to ns; the
// oldest of those.
func (pc *PushContext) destinationRule(ns string, svc *Service) *networking.DestinationRule {
	var best *networking.DestinationRule
	rank := 4 // below any
	root := MeshRootNamespace(pc.Mesh)
	pc.configIndex().destinationRules.each(svc.Hostname, func(i int) bool {
		dr := pc.DestinationRules[i]
		if !exportedTo(dr.Spec.GetExportTo(), dr.Namespace, ns) {
			return true
		}
		if r := ruleRank(dr.Namespace, ns, svc.Namespace, root, privateRule(dr)); r > 0 && r < rank {
			best, rank = dr, r
		}
		return rank > 1 // nothing older ranks above the proxy's namespace
	})
	return best
}

// ruleRank ranks a DestinationRule of namespace ruleNS for a service of
// svcNS seen from proxyNS where Istio looks for one: 1 in the proxy's
// namespace, 2 in the service's, 3 in the mesh's root namespace; 0 in any
// other, which Istio never applies. A proxy in the root namespace takes
// only the root's private rules (exportTo ".") first.
func ruleRank(ruleNS, proxyNS, svcNS, rootNS string, private bool) int {
	switch {
	case ruleNS == proxyNS && (proxyNS != rootNS || private):
		return 1
	case ruleNS == svcNS:
		return 2
	case ruleNS == rootNS:
		return 3
	}
	return 0
}

// privateRule reports whether dr is exported to its own namespace alone.
func privateRule(dr *networking.DestinationRule) bool {
	e := dr.Spec.GetExportTo()
	return len(e) == 1 && (e[0] == "." || e[0] == dr.Namespace)
}
