package gen

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// What the types read of endpoints, per scope and service: the memos
// declare it, and ReadsEndpoints tells the server what an endpoint-only
// change has to push. Listeners and routes read none.

// endpointsRead: a scope's load assignments are those of its
// client-side-balanced services.
func endpointsRead(sc *model.Scope, svc *model.Service) bool {
	return svc.Resolution == model.ClientSideLB && sc.Visible(svc.Hostname)
}

// clustersRead: DNS-resolved clusters carry their endpoints' host names.
func clustersRead(sc *model.Scope, svc *model.Service) bool {
	return svc.Resolution == model.DNSLB && sc.Visible(svc.Hostname)
}

// nameTableRead: the name table lists headless services' endpoints.
func nameTableRead(sc *model.Scope, svc *model.Service) bool {
	return headless(svc) && sc.Visible(svc.Hostname)
}

// ReadsEndpoints reports whether the typeURL resources of proxy p are built
// from the endpoints of any of hosts, so that an endpoint-only change of
// hosts has to push them: EDS for client-side-balanced services, CDS for
// DNS-resolved ones, NDS for headless ones.
func ReadsEndpoints(pc *model.PushContext, p *model.Proxy, typeURL string, hosts map[string]struct{}) bool {
	var reads func(*model.Scope, *model.Service) bool
	switch typeURL {
	case EndpointType:
		reads = endpointsRead
	case ClusterType:
		reads = clustersRead
	case NameTableType:
		reads = nameTableRead
	default:
		return false
	}
	sc := pc.ScopeFor(p)
	for h := range hosts {
		if svc := pc.ServiceByHost[h]; svc != nil && reads(sc, svc) {
			return true
		}
	}
	return false
}

// Generate returns the resources of typeURL for proxy p. names restricts
// the result to those names (nil or empty: all, for wildcard types); names
// that do not exist are left out. Resources are sorted by name. When a
// resource that belongs in the result could not be built, Generate returns
// a *ResourceError and no resources: a set without it would tell the proxy
// to delete it.
func Generate(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*Resource, error) {
	out, err := generate(pc, p, typeURL, names)
	if err == nil {
		err = failed(out)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func generate(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*Resource, error) {
	if p.IsGRPC() {
		return generateGRPC(pc, p, typeURL, names)
	}
	sc := pc.ScopeFor(p)
	var out []*Resource
	switch typeURL {
	case ClusterType:
		ports := inboundPorts(pc, p)
		out = withInboundClusters.Get(pc, inboundKey[string]{scope: sc, inbound: clusterPortsKey(ports)}, func() []*Resource {
			return merge(scopeClusters(pc, sc), inboundClusters(pc, ports))
		})
	case ListenerType:
		in, labels := inboundListener(pc, p), p.WorkloadLabels(pc)
		v := viewOf(pc, sc, labels)
		out = withInboundListener.Get(pc, inboundKey[*Resource]{scope: sc, src: v.src, inbound: in}, func() []*Resource {
			return merge(scopeListeners(pc, v, labels), []*Resource{in})
		})
	case RouteType:
		labels := p.WorkloadLabels(pc)
		out = scopeRoutes(pc, viewOf(pc, sc, labels), labels)
	case EndpointType:
		return endpoints(pc, sc, names), nil
	case NameTableType:
		out = []*Resource{nameTable(pc, sc)}
	default:
		return nil, fmt.Errorf("unsupported type %s", typeURL)
	}
	if len(names) > 0 && typeURL != NameTableType {
		out = filter(out, names)
	}
	return out, nil
}

// A sidecar's clusters and listeners are its scope's with its inbound
// ones merged in. The sidecars of a scope whose inbound ports (clusters)
// or listener are alike get one merged list, so what compares and sends
// lists then finds them the same.
var (
	withInboundClusters = model.NewEndpointMemo[inboundKey[string], []*Resource](func(k inboundKey[string], svc *model.Service) bool {
		return clustersRead(k.scope, svc)
	})
	withInboundListener = model.NewMemo[inboundKey[*Resource], []*Resource]()
)

// inboundKey is a scope and what names a sidecar's inbound part: its
// ports' key for clusters, its (shared) listener for listeners, with its
// view's src for listeners.
type inboundKey[T comparable] struct {
	scope   *model.Scope
	src     string
	inbound T
}

// merge merges two lists sorted by name into a new one.
func merge(a, b []*Resource) []*Resource {
	out := make([]*Resource, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Name <= b[0].Name {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// sortByName sorts resources by name.
func sortByName(rs []*Resource) []*Resource {
	slices.SortFunc(rs, func(a, b *Resource) int { return strings.Compare(a.Name, b.Name) })
	return rs
}

// filter keeps the resources named in names.
func filter(rs []*Resource, names []string) []*Resource {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []*Resource
	for _, r := range rs {
		if want[r.Name] {
			out = append(out, r)
		}
	}
	return out
}

// values returns m's resources, sorted by name.
func values(m map[string]*Resource) []*Resource {
	out := make([]*Resource, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return sortByName(out)
}

// lookup returns the resources find finds for names, sorted by name, each
// once.
func lookup(names []string, find func(name string) *Resource) []*Resource {
	out := make([]*Resource, 0, len(names))
	for _, n := range names {
		if r := find(n); r != nil {
			out = append(out, r)
		}
	}
	if !slices.IsSortedFunc(out, func(a, b *Resource) int { return strings.Compare(a.Name, b.Name) }) {
		sortByName(out)
	}
	return slices.CompactFunc(out, func(a, b *Resource) bool { return a.Name == b.Name })
}

// marshalAll turns messages into resources; name reads a message's name.
// A message that does not marshal stays in the list as a failed resource
// (see newResource), so that Generate reports it instead of leaving it out.
func marshalAll[T proto.Message](ms []T, name func(T) string) []*Resource {
	out := make([]*Resource, 0, len(ms))
	for _, m := range ms {
		r, _ := newResource(name(m), m) // r holds the error
		out = append(out, r)
	}
	return out
}

// EndpointHosts returns the host of an outbound cluster name, for matching
// endpoint changes to EDS subscriptions.
func EndpointHosts(cluster string) string {
	_, _, host, ok := model.ParseClusterName(cluster)
	if !ok {
		return ""
	}
	return host
}

// ClusterNames returns the EDS cluster names of host as proxy p sees them
// (every port, every subset), for pushing an endpoint change.
func ClusterNames(pc *model.PushContext, p *model.Proxy, host string) []string {
	sc := pc.ScopeFor(p)
	svc := pc.ServiceByHost[host]
	if svc == nil || !sc.Visible(host) || svc.Resolution != model.ClientSideLB {
		return nil
	}
	var out []string
	for _, port := range svc.Ports {
		out = append(out, model.ClusterName(port.Port, "", host))
		for _, s := range subsetsOf(sc.DestinationRule[host]) {
			out = append(out, model.ClusterName(port.Port, s.GetName(), host))
		}
	}
	return out
}
