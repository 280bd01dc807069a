package gen

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// grpcKey names a resource a gRPC client of a scope asked for; src is
// its view's, for route configurations (routes match on sources).
type grpcKey struct {
	scope *model.Scope
	src   string
	name  string
}

// The resources of gRPC clients, by scope and name; nil for names that
// do not exist.
var (
	grpcListeners = model.NewMemo[grpcKey, *Resource]()
	grpcRoutes    = model.NewMemo[grpcKey, *Resource]()
	grpcClusters  = model.NewEndpointMemo[grpcKey, *Resource](func(k grpcKey, svc *model.Service) bool {
		_, _, host, _ := model.ParseClusterName(k.name)
		return host == svc.Hostname && clustersRead(k.scope, svc)
	})
)

// generateGRPC serves proxyless gRPC clients: they ask for exact names
// ("host:port" listeners and route configurations, outbound clusters), and
// only those are returned.
func generateGRPC(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*Resource, error) {
	sc := pc.ScopeFor(p)
	if typeURL == EndpointType {
		return endpoints(pc, sc, names), nil
	}
	if typeURL == NameTableType {
		return []*Resource{nameTable(pc, sc)}, nil
	}
	if len(names) == 0 && typeURL == ClusterType {
		for _, svc := range sc.Services {
			for _, port := range svc.Ports {
				names = append(names, model.ClusterName(port.Port, "", svc.Hostname))
				for _, s := range subsetsOf(sc.DestinationRule[svc.Hostname]) {
					names = append(names, model.ClusterName(port.Port, s.GetName(), svc.Hostname))
				}
			}
		}
	}
	var out []*Resource
	for _, name := range names {
		var memo *model.Memo[grpcKey, *Resource]
		key := grpcKey{scope: sc, name: name}
		var build func() proto.Message
		switch typeURL {
		case ListenerType:
			memo, build = grpcListeners, func() proto.Message { return grpcListener(pc, sc, name) }
			if strings.HasPrefix(name, GRPCInboundPrefix) {
				// A server's listener depends on the proxy itself: not memoized per scope.
				if l := grpcInboundListener(pc, sc, p, name); l != nil {
					r, err := newResource(name, l)
					if err != nil {
						return nil, err
					}
					out = append(out, r)
				}
				continue
			}
		case RouteType:
			labels := p.WorkloadLabels(pc)
			key.src = viewOf(pc, sc, labels).src
			memo, build = grpcRoutes, func() proto.Message { return grpcRoute(pc, sc, labels, name) }
		case ClusterType:
			memo, build = grpcClusters, func() proto.Message { return grpcCluster(pc, sc, name) }
		default:
			return nil, fmt.Errorf("unsupported type %s for gRPC clients", typeURL)
		}
		r := memo.Get(pc, key, func() *Resource {
			m := build()
			if m == nil {
				return nil
			}
			r, _ := newResource(name, m)
			return r
		})
		if r != nil {
			out = append(out, r)
		}
	}
	return values(toMap(out)), nil
}

func toMap(rs []*Resource) map[string]*Resource {
	m := make(map[string]*Resource, len(rs))
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

// lookupTarget resolves a dial target "host:port" (host may be a short
// name) to a visible service and port.
func lookupTarget(pc *model.PushContext, sc *model.Scope, target string) (*model.Service, uint16) {
	host, portStr, err := net.SplitHostPort(target)
	if err != nil {
		return nil, 0
	}
	n, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, 0
	}
	for _, h := range []string{host, sc.ResolveHost(host, sc.Namespace), host + ".svc." + model.Domain(sc.Domain)} {
		if svc := sc.Service(h); svc != nil {
			if _, ok := svc.Port(uint16(n)); ok {
				return svc, uint16(n)
			}
		}
	}
	return nil, 0
}

func grpcListener(pc *model.PushContext, sc *model.Scope, name string) proto.Message {
	if svc, _ := lookupTarget(pc, sc, name); svc == nil {
		return nil
	}
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(rdsManager(name, name, grpcHTTPFilters()))},
	}
}

func grpcRoute(pc *model.PushContext, sc *model.Scope, labels map[string]string, name string) proto.Message {
	svc, port := lookupTarget(pc, sc, name)
	if svc == nil {
		return nil
	}
	b := &routeBuilder{pc: pc, scope: sc, grpc: true, labels: labels}
	doms := []string{name}
	for _, d := range []string{svc.Hostname, fmt.Sprintf("%s:%d", svc.Hostname, port)} {
		if d != name {
			doms = append(doms, d)
		}
	}
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name: name, Domains: doms, Routes: b.routes(svc, port), IncludeRequestAttemptCount: attemptCount(pc.Mesh),
		}},
	}
}

func grpcCluster(pc *model.PushContext, sc *model.Scope, name string) proto.Message {
	port, _, host, ok := model.ParseClusterName(name)
	if !ok || !sc.Visible(host) {
		return nil
	}
	svc := sc.Service(host)
	sp, ok := svc.Port(port)
	if !ok {
		return nil
	}
	dr := sc.DestinationRule[host]
	for _, c := range outboundClusters(svc, sp, dr, pc.Endpoints[host], true) {
		if c.GetName() == name {
			_, subset, _, _ := model.ParseClusterName(name)
			withClientTLS(c, dr, subset, pc.Security.Domain())
			return c
		}
	}
	return nil
}
