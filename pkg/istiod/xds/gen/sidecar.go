package gen

import (
	"fmt"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

func clusterName(c *clusterv3.Cluster) string    { return c.GetName() }
func listenerName(l *listenerv3.Listener) string { return l.GetName() }

// What the proxies of one scope share, cached per push. Keys are scopes:
// scopes are cached too, so a scope is one pointer in a push context and in
// those that inherit from it.
var (
	clustersMemo  = model.NewEndpointMemo[*model.Scope, []*Resource](clustersRead)
	endpointsMemo = model.NewEndpointMemo[*model.Scope, map[string]*Resource](endpointsRead)
	listenersMemo = model.NewMemo[view, []*Resource]()
	routesMemo    = model.NewMemo[view, []*Resource]()
	nameTableMemo = model.NewEndpointMemo[*model.Scope, *Resource](nameTableRead)
	// loadAssignments caches each cluster's load assignment; only its
	// host's endpoints go into it.
	loadAssignments = model.NewHostMemo[claKey, *Resource](func(k claKey) string { return k.host })
	// Inbound resources depend on the workload's ports alone.
	inboundClustersMemo = model.NewMemo[string, []*Resource]()
	inboundListenerMemo = model.NewMemo[string, *Resource]()
	// portClusters caches a service port's outbound clusters (with its
	// subsets'), shared by the scopes that see the service under the same
	// DestinationRule: every scope of a mesh without Sidecars sees every
	// service. A DNS cluster holds its host's endpoints.
	portClusters = model.NewHostMemo[portKey, []*Resource](func(k portKey) string { return k.host })
	// portAssignments caches a service port's load assignments (its
	// subsets' after its own) in the same way: after an endpoint change
	// each scope gathers its map again from the ports' lists, and only the
	// changed host's are built again.
	portAssignments = model.NewHostMemo[portKey, []*Resource](func(k portKey) string { return k.host })
)

// portKey names a service port seen under one DestinationRule (nil: none).
type portKey struct {
	host string
	port model.Port
	dr   *networking.DestinationRule
}

// claKey names one cluster's load assignment.
type claKey struct {
	cluster string
	host    string
	labels  string
}

// scopeClusters are the outbound and fixed clusters of a scope.
func scopeClusters(pc *model.PushContext, sc *model.Scope) []*Resource {
	return clustersMemo.Get(pc, sc, func() []*Resource {
		rs := marshalAll(fixedClusters(), clusterName)
		for _, svc := range sc.Services {
			dr := sc.DestinationRule[svc.Hostname]
			for _, p := range svc.Ports {
				rs = append(rs, portClusters.Get(pc, portKey{host: svc.Hostname, port: p, dr: dr}, func() []*Resource {
					return marshalAll(outboundClustersIn(pc.Security, svc, p, dr, pc.Endpoints[svc.Hostname], false), clusterName)
				})...)
			}
		}
		return sortByName(rs)
	})
}

// scopeEndpoints are the load assignments of a scope's EDS clusters.
func scopeEndpoints(pc *model.PushContext, sc *model.Scope) map[string]*Resource {
	return endpointsMemo.Get(pc, sc, func() map[string]*Resource {
		m := make(map[string]*Resource, len(sc.Services))
		for _, svc := range sc.Services {
			if svc.Resolution != model.ClientSideLB {
				continue
			}
			dr := sc.DestinationRule[svc.Hostname]
			for _, p := range svc.Ports {
				for _, r := range portLoadAssignments(pc, svc, p, dr) {
					m[r.Name] = r
				}
			}
		}
		return m
	})
}

// endpoints are the load assignments named names as scope sc sees them;
// all of the scope's for no names. A few names (an endpoint change's push
// names the changed clusters) are each looked up by their cluster's host
// and port, so such a push builds no scope's whole map; many (a sidecar's
// whole subscription, on a full push or a new stream) are picked from the
// scope's map, built once per scope.
func endpoints(pc *model.PushContext, sc *model.Scope, names []string) []*Resource {
	switch {
	case len(names) == 0:
		return values(scopeEndpoints(pc, sc))
	case len(names) >= manyNames:
		m := scopeEndpoints(pc, sc)
		return lookup(names, func(name string) *Resource { return m[name] })
	}
	return lookup(names, func(name string) *Resource { return scopeAssignment(pc, sc, name) })
}

// manyNames is where picking from the scope's map starts to pay for it.
const manyNames = 16

// scopeAssignment is the load assignment of cluster name that
// scopeEndpoints' map holds, or nil.
func scopeAssignment(pc *model.PushContext, sc *model.Scope, name string) *Resource {
	port, _, host, ok := model.ParseClusterName(name)
	if !ok {
		return nil
	}
	svc := sc.Service(host)
	if svc == nil || svc.Resolution != model.ClientSideLB {
		return nil
	}
	var found *Resource
	for _, p := range svc.Ports {
		if p.Port != port {
			continue
		}
		for _, r := range portLoadAssignments(pc, svc, p, sc.DestinationRule[host]) {
			if r.Name == name {
				found = r // the last, as in the map
			}
		}
	}
	return found
}

// portLoadAssignments are the (cached) load assignments of a service
// port's cluster and of its subsets' under dr.
func portLoadAssignments(pc *model.PushContext, svc *model.Service, p model.Port, dr *networking.DestinationRule) []*Resource {
	return portAssignments.Get(pc, portKey{host: svc.Hostname, port: p, dr: dr}, func() []*Resource {
		subsets := subsetsOf(dr)
		out := make([]*Resource, 0, 1+len(subsets))
		out = append(out, clusterLoadAssignment(pc, svc, p.Port, model.ClusterName(p.Port, "", svc.Hostname), nil))
		for _, s := range subsets {
			labels, _ := subsetLabels(dr, s.GetName())
			out = append(out, clusterLoadAssignment(pc, svc, p.Port, model.ClusterName(p.Port, s.GetName(), svc.Hostname), labels))
		}
		return out
	})
}

// clusterLoadAssignment returns the (cached) assignment of one cluster.
func clusterLoadAssignment(pc *model.PushContext, svc *model.Service, port uint16, name string, labels map[string]string) *Resource {
	key := claKey{cluster: name, host: svc.Hostname, labels: fmt.Sprint(labelPairs(labels))}
	return loadAssignments.Get(pc, key, func() *Resource {
		r, _ := newResource(name, loadAssignment(name, port, labels, pc.Endpoints[svc.Hostname]))
		return r
	})
}

func labelPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// scopeListeners are virtualOutbound and the per-port outbound listeners
// of view v, as sidecars with labels see them.
func scopeListeners(pc *model.PushContext, v view, labels map[string]string) []*Resource {
	return listenersMemo.Get(pc, v, func() []*Resource {
		return sortByName(marshalAll(outboundListeners(v.scope, labels, pc.Mesh), listenerName))
	})
}

// scopeRoutes are the outbound route configurations of view v, one per
// HTTP port, as sidecars with labels see them.
func scopeRoutes(pc *model.PushContext, v view, labels map[string]string) []*Resource {
	sc := v.scope
	return routesMemo.Get(pc, v, func() []*Resource {
		b := &routeBuilder{pc: pc, scope: sc, labels: labels}
		byPort := map[uint16][]vhostPart{}
		var ports []uint16
		for _, svc := range sc.Services {
			for _, p := range svc.Ports {
				if !p.Protocol.IsHTTP() {
					continue
				}
				if _, ok := byPort[p.Port]; !ok {
					ports = append(ports, p.Port)
				}
				byPort[p.Port] = append(byPort[p.Port], b.virtualHost(svc, p.Port))
			}
		}
		slices.Sort(ports)
		rs := make([]*Resource, 0, len(ports))
		for _, p := range ports {
			parts := byPort[p]
			dedupeDomains(parts)
			parts = append(parts, vhostPart{own: catchAllVirtualHost(sc, pc.Mesh)})
			rs = append(rs, routeConfiguration(strconv.Itoa(int(p)), parts))
		}
		return sortByName(rs)
	})
}

// inboundPorts are the workload ports of the services selecting p's
// workload, in its namespace.
func inboundPorts(pc *model.PushContext, p *model.Proxy) []inboundPort {
	labels := p.WorkloadLabels(pc)
	if labels == nil {
		return nil
	}
	seen := map[uint16]bool{}
	var out []inboundPort
	for _, svc := range pc.KubeServicesSelecting(p.Namespace, labels) {
		for _, port := range svc.Ports {
			t := port.TargetPort
			if t == 0 {
				t = port.Port
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, inboundPort{port: t, protocol: port.Protocol, svcPort: port.Port, host: svc.Hostname})
			}
		}
	}
	slices.SortFunc(out, func(a, b inboundPort) int { return int(a.port) - int(b.port) })
	return out
}

// portsKey names a set of inbound ports with the services that name
// them, to share the listener built from it.
func portsKey(ports []inboundPort) string {
	return fmt.Sprint(ports)
}

// clusterPortsKey names a set of inbound ports alone, to share the
// clusters built from it (an inbound cluster names its port only).
func clusterPortsKey(ports []inboundPort) string {
	b := make([]byte, 0, 6*len(ports))
	for _, p := range ports {
		b = strconv.AppendUint(append(b, ' '), uint64(p.port), 10)
	}
	return string(b)
}

func inboundClusters(pc *model.PushContext, ports []inboundPort) []*Resource {
	return inboundClustersMemo.Get(pc, clusterPortsKey(ports), func() []*Resource {
		var cs []*clusterv3.Cluster
		for _, ip := range ports {
			cs = append(cs, inboundCluster(ip.port))
		}
		return sortByName(marshalAll(cs, clusterName))
	})
}

// inboundListener is virtualInbound (see sidecarInbound), shared by the
// proxies of one push whose workloads have the same namespace and ports
// and are selected by the same security policies: the replicas of an app,
// and the apps alike that no policy tells apart.
func inboundListener(pc *model.PushContext, p *model.Proxy) *Resource {
	ports := inboundPorts(pc, p)
	w := workloadOf(pc, p)
	wp := policiesOf(pc, w)
	return inboundListenerMemo.Get(pc, portsKey(ports)+" "+w.Namespace+" "+wp.key(), func() *Resource {
		r, _ := newResource(VirtualInbound, sidecarInbound(wp, ports, pc.Mesh))
		return r
	})
}
