package gen

import (
	"fmt"
	"iter"
	"net/netip"
	"strconv"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// routeBuilder builds the routes of service ports as seen from one scope.
// Routes read the scope's services and rules through service and rule
// alone, which record the reads that decide whether a scope may share a
// host another built.
type routeBuilder struct {
	pc    *model.PushContext
	scope *model.Scope
	grpc  bool
	// labels are the proxies' workload labels, for matches on their
	// sources (route_source.go); the builder's result is shared by the
	// proxies that agree on those matches (view).
	labels map[string]string
	// logs are the access logs of the TCP proxies the builder makes
	// (accessLogs).
	logs []*accesslogv3.AccessLog
	// reads, when set, records what the builder reads of its scope
	// (service and rule), so what it builds can be shared by scopes
	// that read the same (routedHost).
	reads *[]scopeRead
}

// service is the scope's service of host; rule its DestinationRule.
func (b *routeBuilder) service(host string) *model.Service {
	b.record(host)
	return b.scope.Service(host)
}

func (b *routeBuilder) rule(host string) *networking.DestinationRule {
	b.record(host)
	return b.scope.DestinationRule[host]
}

func (b *routeBuilder) record(host string) {
	if b.reads == nil {
		return
	}
	for _, r := range *b.reads {
		if r.host == host {
			return
		}
	}
	*b.reads = append(*b.reads, readScope(b.scope, host))
}

// clusterExists reports whether an outbound cluster is generated in scope.
func (b *routeBuilder) clusterExists(port uint16, subset, host string) bool {
	svc := b.service(host)
	if svc == nil {
		return false
	}
	if _, ok := svc.Port(port); !ok {
		return false
	}
	_, ok := subsetLabels(b.rule(host), subset)
	return ok
}

// destination resolves a VirtualService destination to a cluster name.
// Envoy sidecars get BlackHoleCluster for destinations that do not exist
// (Envoy rejects nothing, but answers 503); gRPC clients get the name.
func (b *routeBuilder) destination(d *apinet.Destination, vsNS string, svc *model.Service, port uint16) string {
	host := b.scope.ResolveHost(d.GetHost(), vsNS)
	p := uint16(d.GetPort().GetNumber())
	if p == 0 {
		p = port
		if host != svc.Hostname {
			if dst := b.service(host); dst != nil && len(dst.Ports) == 1 {
				p = dst.Ports[0].Port
			}
		}
	}
	if !b.grpc && !b.clusterExists(p, d.GetSubset(), host) {
		return BlackHoleCluster
	}
	return model.ClusterName(p, d.GetSubset(), host)
}

// routes returns the routes of svc:port: the VirtualService's HTTP routes
// that apply to the port and b's proxies, in order, or, as Istio, one
// default route to the service when none does.
func (b *routeBuilder) routes(svc *model.Service, port uint16) []*routev3.Route {
	vs := b.scope.VirtualService[svc.Hostname]
	if vs == nil || len(vs.Spec.GetHttp()) == 0 {
		return []*routev3.Route{b.defaultRoute(svc, port)}
	}
	var out []*routev3.Route
	for i, hr := range vs.Spec.GetHttp() {
		if !matchesPort(hr, port) {
			continue
		}
		name := hr.GetName()
		if name == "" {
			name = fmt.Sprintf("%s.%s.%d", vs.Name, vs.Namespace, i)
		}
		matches := hr.GetMatch()
		if len(matches) == 0 {
			matches = []*apinet.HTTPMatchRequest{nil}
		}
		for _, m := range matches {
			if m.GetPort() != 0 && m.GetPort() != uint32(port) || !b.httpFromHere(m) {
				continue
			}
			rn := name
			if m.GetName() != "" {
				rn += "." + m.GetName() // Istio's "route.match" naming
			}
			if r := b.route(hr, m, vs, svc, port, rn); r != nil {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		return []*routev3.Route{b.defaultRoute(svc, port)}
	}
	return out
}

// defaultRoute sends everything to the service, hashed as its
// DestinationRule says, retried as the mesh says (retryPolicy).
func (b *routeBuilder) defaultRoute(svc *model.Service, port uint16) *routev3.Route {
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: model.ClusterName(port, "", svc.Hostname)}}
	setTimeout(a, nil, false)
	if hp := hashPolicy(serviceHash(b.rule(svc.Hostname), port), b.grpc); hp != nil {
		a.HashPolicy = []*routev3.RouteAction_HashPolicy{hp}
	}
	a.RetryPolicy = retryPolicy(nil, b.pc.Mesh, false) // Istio's default route keeps previous_hosts, hashed or not
	return &routev3.Route{
		Name:      "default",
		Match:     &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action:    &routev3.Route_Route{Route: a},
		Decorator: &routev3.Decorator{Operation: svc.Hostname + ":" + strconv.Itoa(int(port)) + "/*"},
	}
}

// matchesPort reports whether an HTTP route applies to port (a match with a
// port restricts it).
func matchesPort(hr *apinet.HTTPRoute, port uint16) bool {
	if len(hr.GetMatch()) == 0 {
		return true
	}
	for _, m := range hr.GetMatch() {
		if m.GetPort() == 0 || m.GetPort() == uint32(port) {
			return true
		}
	}
	return false
}

// route builds the route of one match of hr; nil when it has nothing the
// client can act on (no destination; a redirect, for gRPC clients).
func (b *routeBuilder) route(hr *apinet.HTTPRoute, m *apinet.HTTPMatchRequest, vs *networking.VirtualService, svc *model.Service, port uint16, name string) *routev3.Route {
	r := &routev3.Route{Name: name, Match: routeMatch(m), Metadata: configMetadata(vs)}
	var ops headerOps
	if hr.GetHeaders() != nil && !b.grpc {
		ops = headerOperations(hr.GetHeaders())
		applyHeaders(r, ops)
	}
	if hr.GetRedirect() != nil {
		if b.grpc || !applyRedirect(r, hr.GetRedirect(), port) {
			return nil
		}
	} else {
		a := b.action(hr, vs, svc, port, r, ops.authority)
		if a == nil {
			return nil
		}
		r.Action = &routev3.Route_Route{Route: a}
	}
	if f := routeFault(hr.GetFault()); f != nil {
		r.TypedPerFilterConfig = map[string]*anypb.Any{FaultFilter: mustAny(f)}
	}
	r.Decorator = &routev3.Decorator{Operation: operation(r, vs.Name, port)}
	if c := hr.GetCorsPolicy(); c != nil && !b.grpc {
		if r.TypedPerFilterConfig == nil {
			r.TypedPerFilterConfig = map[string]*anypb.Any{}
		}
		r.TypedPerFilterConfig[CORSFilter] = mustAny(corsPolicy(c))
	}
	return r
}

// action builds the forwarding action of hr; authority is a host rewrite
// asked for by the route's header operations. Destination header
// operations go to r (one destination) or to their cluster weight.
func (b *routeBuilder) action(hr *apinet.HTTPRoute, vs *networking.VirtualService, svc *model.Service, port uint16, r *routev3.Route, authority string) *routev3.RouteAction {
	dests := hr.GetRoute()
	if len(dests) == 0 {
		return nil
	}
	a := &routev3.RouteAction{}
	setTimeout(a, hr.GetTimeout(), b.grpc)
	if !b.grpc {
		authority = b.applyRewrite(a, hr.GetRewrite(), authority)
		if authority != "" {
			a.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: authority}
		}
		a.RequestMirrorPolicies = b.mirrors(hr, vs.Namespace, svc, port)
	}
	if len(dests) == 1 {
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: b.destination(dests[0].GetDestination(), vs.Namespace, svc, port)}
		if h := dests[0].GetHeaders(); h != nil && !b.grpc {
			ops := headerOperations(h)
			applyHeaders(r, ops)
			if ops.authority != "" && a.HostRewriteSpecifier == nil {
				a.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
			}
		}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, d := range dests {
			if d.GetWeight() == 0 {
				continue
			}
			cw := &routev3.WeightedCluster_ClusterWeight{
				Name: b.destination(d.GetDestination(), vs.Namespace, svc, port), Weight: wrapperspb.UInt32(uint32(d.GetWeight())),
			}
			if h := d.GetHeaders(); h != nil && !b.grpc {
				ops := headerOperations(h)
				cw.RequestHeadersToAdd, cw.ResponseHeadersToAdd = ops.reqAdd, ops.respAdd
				cw.RequestHeadersToRemove, cw.ResponseHeadersToRemove = ops.reqRemove, ops.respRemove
				if ops.authority != "" {
					cw.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
				}
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		if len(wc.Clusters) == 0 {
			return nil
		}
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	hashed := false // one destination, hashed: retries stay on its host
	for _, d := range dests {
		if len(dests) > 1 && d.GetWeight() == 0 {
			continue
		}
		host := b.scope.ResolveHost(d.GetDestination().GetHost(), vs.Namespace)
		h := destinationHash(b.rule(host), d.GetDestination())
		hashed = len(dests) == 1 && h != nil
		if hp := hashPolicy(h, b.grpc); hp != nil {
			a.HashPolicy = append(a.HashPolicy, hp)
		}
	}
	a.RetryPolicy = retryPolicy(hr.GetRetries(), b.pc.Mesh, hashed)
	return a
}

// domains lists the names a sidecar's virtual host answers to, as Istio
// 1.31 writes them for a sidecar: each of hostNames without a port (the
// route configuration ignores the port in host matching), IPv6 addresses
// in brackets as a Host header carries them.
func domains(svc *model.Service, proxyNS string) []string {
	out := make([]string, 0, 5+len(svc.Addresses))
	for n := range hostNames(svc, proxyNS) {
		if strings.IndexByte(n, ':') >= 0 {
			n = "[" + n + "]"
		}
		out = append(out, n)
	}
	return out
}

// hostNames yields the names of svc a sidecar in proxyNS may use: the
// host name, also absolute (with its trailing dot, unless it is an
// address), the short forms of a Kubernetes service (the bare name in its
// own namespace only); for a headless service each of those again under
// "*.", which its pods' names are; then the VIPs.
func hostNames(svc *model.Service, proxyNS string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !serviceNames(svc, proxyNS, "", yield) || headless(svc) && !serviceNames(svc, proxyNS, "*.", yield) {
			return
		}
		for _, a := range svc.Addresses {
			if !yield(a) {
				return
			}
		}
	}
}

// serviceNames yields svc's names (hostNames without the VIPs), each after
// prefix; false when yield stopped it.
func serviceNames(svc *model.Service, proxyNS, prefix string, yield func(string) bool) bool {
	if !yield(prefix + svc.Hostname) {
		return false
	}
	if _, err := netip.ParseAddr(svc.Hostname); err != nil && !yield(prefix+svc.Hostname+".") {
		return false
	}
	if svc.Registry != model.RegistryKubernetes {
		return true
	}
	short, shortSvc := kubeShortNames(svc)
	return yield(prefix+short) && yield(prefix+shortSvc) && (svc.Namespace != proxyNS || yield(prefix+svc.Name))
}

// kubeShortNames are name.namespace and name.namespace.svc, cut from the
// host name, which begins with them.
func kubeShortNames(svc *model.Service) (string, string) {
	h, name, n := svc.Hostname, svc.Name, len(svc.Name)+1+len(svc.Namespace)
	if len(h) >= n+4 && h[:len(name)] == name && h[len(name)] == '.' && h[len(name)+1:n] == svc.Namespace && h[n:n+4] == ".svc" {
		return h[:n], h[:n+4]
	}
	short := name + "." + svc.Namespace
	return short, short + ".svc"
}
