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

// generateGRPC serves proxyless gRPC clients: they ask for exact names
// ("host:port" listeners and route configurations, outbound clusters), and
// only those are returned.
func generateGRPC(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*Resource, error) {
	sc := pc.ScopeFor(p)
	if typeURL == EndpointType {
		return pick(scopeEndpoints(pc, sc), names), nil
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
		var kind string
		var build func() proto.Message
		switch typeURL {
		case ListenerType:
			kind, build = "grpc-lds", func() proto.Message { return grpcListener(pc, sc, name) }
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
			kind, build = "grpc-rds", func() proto.Message { return grpcRoute(pc, sc, name) }
		case ClusterType:
			kind, build = "grpc-cds", func() proto.Message { return grpcCluster(pc, sc, name) }
		default:
			return nil, fmt.Errorf("unsupported type %s for gRPC clients", typeURL)
		}
		r, _ := pc.Memo(memoKey{kind: kind, scope: sc.Key, name: name}, func() any {
			m := build()
			if m == nil {
				return (*Resource)(nil)
			}
			r, _ := newResource(name, m)
			return r
		}).(*Resource)
		if r != nil {
			out = append(out, r)
		}
	}
	return pick(toMap(out), nil), nil
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
	for _, h := range []string{host, model.ResolveHost(host, sc.Namespace), host + ".svc." + model.DefaultDomain} {
		if svc := pc.ServiceByHost[h]; svc != nil && sc.Visible(h) {
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
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(rdsManager(name, name))},
	}
}

func grpcRoute(pc *model.PushContext, sc *model.Scope, name string) proto.Message {
	svc, port := lookupTarget(pc, sc, name)
	if svc == nil {
		return nil
	}
	b := &routeBuilder{pc: pc, scope: sc, grpc: true}
	doms := []string{name}
	for _, d := range []string{svc.Hostname, fmt.Sprintf("%s:%d", svc.Hostname, port)} {
		if d != name {
			doms = append(doms, d)
		}
	}
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name: name, Domains: doms, Routes: b.routes(svc, port),
		}},
	}
}

func grpcCluster(pc *model.PushContext, sc *model.Scope, name string) proto.Message {
	port, _, host, ok := model.ParseClusterName(name)
	if !ok || !sc.Visible(host) {
		return nil
	}
	svc := pc.ServiceByHost[host]
	sp, ok := svc.Port(port)
	if !ok {
		return nil
	}
	dr := sc.DestinationRule[host]
	for _, c := range outboundClusters(svc, sp, dr, pc.Endpoints[host], true) {
		if c.GetName() == name {
			_, subset, _, _ := model.ParseClusterName(name)
			withClientTLS(c, dr, subset)
			return c
		}
	}
	return nil
}
