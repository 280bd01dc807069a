package gen

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// catchAllVirtualHost is the last virtual host of a sidecar's outbound
// route configurations, for hosts outside the registry, as Istio builds it:
// "allow_any" forwarding to the PassthroughCluster (or the Sidecar's egress
// proxy) without a timeout under ALLOW_ANY, "block_all" answering 502 under
// REGISTRY_ONLY; with the attempt count header as the mesh says
// (attemptCount).
func catchAllVirtualHost(sc *model.Scope, mesh *meshconfig.MeshConfig) *routev3.VirtualHost {
	match := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if sc.OutboundPolicy == model.OutboundRegistryOnly {
		return &routev3.VirtualHost{Name: "block_all", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Name: "block_all", Match: match,
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 502}},
		}}, IncludeRequestAttemptCount: attemptCount(mesh)}
	}
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: outboundCatchAll(sc)}}
	setTimeout(a, nil, false)
	return &routev3.VirtualHost{Name: "allow_any", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Name: "allow_any", Match: match, Action: &routev3.Route_Route{Route: a},
	}}, IncludeRequestAttemptCount: attemptCount(mesh)}
}
