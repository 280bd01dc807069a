package analysis

import (
	"fmt"
	"slices"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// qualify returns host as a fully qualified name: a short name is a
// Service in ns, named in the set's cluster domain.
func (s *Set) qualify(host, ns string) string {
	if strings.Contains(host, ".") || host == "" || strings.HasPrefix(host, "*") {
		return host
	}
	return model.KubeHostnameIn(host, ns, s.Domain)
}

// hostIndex knows the hosts of the mesh: Services and ServiceEntry hosts.
type hostIndex struct {
	exact     map[string]bool
	wildcards []string // ServiceEntry hosts "*.example.com", without the "*"
}

func (s *Set) hostIndex() *hostIndex {
	idx := &hostIndex{exact: map[string]bool{}}
	for _, svc := range s.Services {
		idx.exact[model.KubeHostnameIn(svc.Name, svc.Namespace, s.Domain)] = true
		idx.exact[svc.Name+"."+svc.Namespace] = true // resolved through the pod's DNS search path
	}
	for _, se := range s.ServiceEntries {
		for _, h := range se.Spec.GetHosts() {
			if rest, ok := strings.CutPrefix(h, "*"); ok {
				idx.wildcards = append(idx.wildcards, rest)
				continue
			}
			idx.exact[s.qualify(h, se.Namespace)] = true
		}
	}
	return idx
}

// known reports whether a host (already qualified) names something; a
// wildcard host is not checked.
func (idx *hostIndex) known(host string) bool {
	if strings.HasPrefix(host, "*") || idx.exact[host] {
		return true
	}
	for _, w := range idx.wildcards {
		if w == "" || strings.HasSuffix(host, w) {
			return true
		}
	}
	return false
}

// destination is one host reference of a VirtualService.
type destination struct {
	field, what, host, subset string
	mirror                    bool
}

func destinations(vs *apinet.VirtualService) []destination {
	var out []destination
	for i, h := range vs.GetHttp() {
		for j, r := range h.GetRoute() {
			out = append(out, destination{fmt.Sprintf("spec.http[%d].route[%d].destination", i, j), "host", r.GetDestination().GetHost(), r.GetDestination().GetSubset(), false})
		}
		if m := h.GetMirror(); m != nil {
			out = append(out, destination{fmt.Sprintf("spec.http[%d].mirror", i), "mirror host", m.GetHost(), m.GetSubset(), true})
		}
		for j, m := range h.GetMirrors() {
			out = append(out, destination{fmt.Sprintf("spec.http[%d].mirrors[%d].destination", i, j), "mirror host", m.GetDestination().GetHost(), m.GetDestination().GetSubset(), true})
		}
	}
	for i, t := range vs.GetTcp() {
		for j, r := range t.GetRoute() {
			out = append(out, destination{fmt.Sprintf("spec.tcp[%d].route[%d].destination", i, j), "host", r.GetDestination().GetHost(), r.GetDestination().GetSubset(), false})
		}
	}
	for i, t := range vs.GetTls() {
		for j, r := range t.GetRoute() {
			out = append(out, destination{fmt.Sprintf("spec.tls[%d].route[%d].destination", i, j), "host", r.GetDestination().GetHost(), r.GetDestination().GetSubset(), false})
		}
	}
	return out
}

// hosts reports references to hosts that do not exist: VirtualService
// destinations and mirrors, DestinationRule hosts, Sidecar egress hosts.
func (s *Set) hosts() []Message {
	idx := s.hostIndex()
	subsets := map[string]bool{} // "qualified host+subset"
	for _, dr := range s.DestinationRules {
		for _, ss := range dr.Spec.GetSubsets() {
			subsets[s.qualify(dr.Spec.GetHost(), dr.Namespace)+"+"+ss.GetName()] = true
		}
	}
	var out []Message
	for _, vs := range s.VirtualServices {
		k := key(model.KindVirtualService, vs.ObjectMeta)
		for _, d := range destinations(&vs.Spec) {
			q := s.qualify(d.host, vs.Namespace)
			if d.host != "" && !idx.known(q) {
				out = append(out, newMessage(ReferencedResourceNotFound, k, d.field+".host", d.what, d.host))
			}
			if d.subset != "" && !subsets[q+"+"+d.subset] {
				what := "host+subset in destinationrule"
				if d.mirror {
					what = "mirror+subset in destinationrule"
				}
				out = append(out, newMessage(ReferencedResourceNotFound, k, d.field+".subset", what, d.host+"+"+d.subset))
			}
		}
	}
	for _, dr := range s.DestinationRules {
		if h := dr.Spec.GetHost(); h != "" && !idx.known(s.qualify(h, dr.Namespace)) {
			out = append(out, newMessage(UnknownDestinationRuleHost, key(model.KindDestinationRule, dr.ObjectMeta), "spec.host", h))
		}
	}
	for _, sc := range s.Sidecars {
		k := key(model.KindSidecar, sc.ObjectMeta)
		for i, eg := range sc.Spec.GetEgress() {
			for j, h := range eg.GetHosts() {
				ns, host, ok := strings.Cut(h, "/")
				if !ok || strings.Contains(host, "*") {
					continue
				}
				if ns == "." || ns == "~" {
					ns = sc.Namespace
				}
				if !idx.known(s.qualify(host, ns)) {
					out = append(out, newMessage(ReferencedResourceNotFound, k, fmt.Sprintf("spec.egress[%d].hosts[%d]", i, j), "egress host", h))
				}
			}
		}
	}
	return out
}

// boundToMesh reports whether a VirtualService applies to sidecars.
func boundToMesh(vs *apinet.VirtualService) bool {
	gws := vs.GetGateways()
	return len(gws) == 0 || slices.Contains(gws, "mesh")
}

// conflicts reports hosts defined by more than one VirtualService bound to
// the mesh.
func (s *Set) conflicts() []Message {
	type def struct {
		key   model.Key
		field string
	}
	byHost := map[string][]def{}
	var order []string
	for _, vs := range s.VirtualServices {
		if !boundToMesh(&vs.Spec) {
			continue
		}
		for i, h := range vs.Spec.GetHosts() {
			q := s.qualify(h, vs.Namespace)
			if _, ok := byHost[q]; !ok {
				order = append(order, q)
			}
			byHost[q] = append(byHost[q], def{key(model.KindVirtualService, vs.ObjectMeta), fmt.Sprintf("spec.hosts[%d]", i)})
		}
	}
	var out []Message
	for _, h := range order {
		defs := byHost[h]
		if len(defs) < 2 {
			continue
		}
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = d.key.Namespace + "/" + d.key.Name
		}
		slices.Sort(names)
		for _, d := range defs {
			out = append(out, newMessage(ConflictingMeshGatewayVirtualServiceHosts, d.key, d.field, strings.Join(names, ","), h))
		}
	}
	return out
}

// gateways reports VirtualServices that apply to no sidecar, and, when the
// Gateways are known, references to Gateways that do not exist.
func (s *Set) gateways() []Message {
	known := map[string]bool{}
	for _, g := range s.Gateways {
		known[g.Namespace+"/"+g.Name] = true
	}
	var out []Message
	for _, vs := range s.VirtualServices {
		k := key(model.KindVirtualService, vs.ObjectMeta)
		gws := vs.Spec.GetGateways()
		if !boundToMesh(&vs.Spec) {
			out = append(out, newMessage(GatewayOnlyVirtualService, k, "spec.gateways", strings.Join(gws, ",")))
		}
		if s.Gateways == nil {
			continue
		}
		for i, g := range gws {
			if g == "mesh" {
				continue
			}
			full := g
			if !strings.Contains(g, "/") {
				full = vs.Namespace + "/" + g
			}
			if !known[full] {
				out = append(out, newMessage(ReferencedResourceNotFound, k, fmt.Sprintf("spec.gateways[%d]", i), "gateway", g))
			}
		}
	}
	return out
}
