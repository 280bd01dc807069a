package gen

import (
	"fmt"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// routeBuilder builds the routes of service ports as seen from one scope.
type routeBuilder struct {
	pc    *model.PushContext
	scope *model.Scope
	grpc  bool
}

// clusterExists reports whether an outbound cluster is generated in scope.
func (b *routeBuilder) clusterExists(port uint16, subset, host string) bool {
	svc := b.pc.ServiceByHost[host]
	if svc == nil || !b.scope.Visible(host) {
		return false
	}
	if _, ok := svc.Port(port); !ok {
		return false
	}
	_, ok := subsetLabels(b.scope.DestinationRule[host], subset)
	return ok
}

// destination resolves a VirtualService destination to a cluster name.
// Envoy sidecars get BlackHoleCluster for destinations that do not exist
// (Envoy rejects nothing, but answers 503); gRPC clients get the name.
func (b *routeBuilder) destination(d *apinet.Destination, vsNS string, svc *model.Service, port uint16) string {
	host := model.ResolveHost(d.GetHost(), vsNS)
	p := uint16(d.GetPort().GetNumber())
	if p == 0 {
		p = port
		if host != svc.Hostname {
			if dst := b.pc.ServiceByHost[host]; dst != nil && len(dst.Ports) == 1 {
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
// in order, or one default route to the service.
func (b *routeBuilder) routes(svc *model.Service, port uint16) []*routev3.Route {
	vs := b.scope.VirtualService[svc.Hostname]
	if vs == nil || len(vs.Spec.GetHttp()) == 0 {
		return []*routev3.Route{{
			Name:   "default",
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: model.ClusterName(port, "", svc.Hostname)}, Timeout: durationpb.New(0)}},
		}}
	}
	var out []*routev3.Route
	for i, hr := range vs.Spec.GetHttp() {
		if !matchesPort(hr, port) {
			continue
		}
		action := b.action(hr, vs, svc, port)
		if action == nil {
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
			out = append(out, &routev3.Route{Name: name, Match: routeMatch(m), Action: &routev3.Route_Route{Route: action}})
		}
	}
	return out
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

func (b *routeBuilder) action(hr *apinet.HTTPRoute, vs *networking.VirtualService, svc *model.Service, port uint16) *routev3.RouteAction {
	dests := hr.GetRoute()
	if len(dests) == 0 {
		return nil
	}
	a := &routev3.RouteAction{Timeout: durationpb.New(0)}
	if t := hr.GetTimeout(); t != nil {
		a.Timeout = durationpb.New(t.AsDuration())
	}
	if len(dests) == 1 {
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: b.destination(dests[0].GetDestination(), vs.Namespace, svc, port)}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, d := range dests {
			if d.GetWeight() == 0 {
				continue
			}
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{
				Name: b.destination(d.GetDestination(), vs.Namespace, svc, port), Weight: wrapperspb.UInt32(uint32(d.GetWeight())),
			})
		}
		if len(wc.Clusters) == 0 {
			return nil
		}
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if r := hr.GetRetries(); r != nil && r.GetAttempts() > 0 {
		rp := &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(uint32(r.GetAttempts())), RetryOn: r.GetRetryOn()}
		if rp.RetryOn == "" {
			rp.RetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
		}
		if t := r.GetPerTryTimeout(); t != nil && !b.grpc {
			rp.PerTryTimeout = durationpb.New(t.AsDuration())
		}
		a.RetryPolicy = rp
	}
	return a
}

// routeMatch converts an Istio match (nil: everything).
func routeMatch(m *apinet.HTTPMatchRequest) *routev3.RouteMatch {
	rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if m == nil {
		return rm
	}
	switch u := m.GetUri().GetMatchType().(type) {
	case *apinet.StringMatch_Exact:
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: u.Exact}
	case *apinet.StringMatch_Prefix:
		rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: u.Prefix}
	case *apinet.StringMatch_Regex:
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: u.Regex}}
	}
	if m.GetIgnoreUriCase() {
		rm.CaseSensitive = wrapperspb.Bool(false)
	}
	names := make([]string, 0, len(m.GetHeaders()))
	for n := range m.GetHeaders() {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if sm := stringMatcher(m.GetHeaders()[n]); sm != nil {
			rm.Headers = append(rm.Headers, &routev3.HeaderMatcher{Name: strings.ToLower(n), HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}})
		}
	}
	if sm := stringMatcher(m.GetMethod()); sm != nil {
		rm.Headers = append(rm.Headers, &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}})
	}
	return rm
}

func stringMatcher(s *apinet.StringMatch) *matcherv3.StringMatcher {
	switch v := s.GetMatchType().(type) {
	case *apinet.StringMatch_Exact:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v.Exact}}
	case *apinet.StringMatch_Prefix:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: v.Prefix}}
	case *apinet.StringMatch_Regex:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v.Regex}}}
	}
	return nil
}

// domains lists the names a sidecar's virtual host answers to: the host
// name and VIPs with and without the port, and for the proxy's own
// namespace the short forms.
func domains(svc *model.Service, port uint16, proxyNS string) []string {
	p := fmt.Sprintf(":%d", port)
	out := []string{svc.Hostname, svc.Hostname + p}
	if svc.Registry == model.RegistryKubernetes {
		short := svc.Name + "." + svc.Namespace
		out = append(out, short, short+p, short+".svc", short+".svc"+p)
		if svc.Namespace == proxyNS {
			out = append(out, svc.Name, svc.Name+p)
		}
	}
	for _, a := range svc.Addresses {
		out = append(out, a, a+p)
	}
	return out
}
