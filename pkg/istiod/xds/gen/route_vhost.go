package gen

import (
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// defaultHosts caches the virtual host of a service port that no
// VirtualService routes: its one route reads nothing of the scope but the
// service's DestinationRule, and its domains only whether the scope is the
// service's namespace (the short names). Every scope of a mesh without
// Sidecars sees most services so. The shared hosts are never modified:
// dedupeDomains copies one it has to change.
var defaultHosts = model.NewMemo[vhostKey, *routev3.VirtualHost]()

// vhostKey names a default virtual host.
type vhostKey struct {
	host  string
	port  uint16
	dr    *networking.DestinationRule
	local bool // the scope is the service's namespace
}

// virtualHost is the virtual host of svc:port as b's scope sees it.
func (b *routeBuilder) virtualHost(svc *model.Service, port uint16) *routev3.VirtualHost {
	build := func() *routev3.VirtualHost {
		return &routev3.VirtualHost{
			Name:    svc.Hostname + ":" + strconv.Itoa(int(port)),
			Domains: domains(svc, port, b.scope.Namespace),
			Routes:  b.routes(svc, port),
		}
	}
	if vs := b.scope.VirtualService[svc.Hostname]; b.grpc || (vs != nil && len(vs.Spec.GetHttp()) > 0) {
		return build()
	}
	k := vhostKey{host: svc.Hostname, port: port, dr: b.scope.DestinationRule[svc.Hostname], local: svc.Namespace == b.scope.Namespace}
	return defaultHosts.Get(b.pc, k, build)
}

// dedupeDomains drops domains already claimed by an earlier virtual host:
// Envoy rejects a route configuration with a domain twice. A virtual host
// that loses domains is replaced by a copy: it may be shared.
func dedupeDomains(rc *routev3.RouteConfiguration) {
	n := 0
	for _, vh := range rc.VirtualHosts {
		n += len(vh.Domains)
	}
	seen := make(map[string]struct{}, n)
	for i, vh := range rc.VirtualHosts {
		var kept []string
		for j, d := range vh.Domains {
			d = strings.ToLower(d)
			if _, dup := seen[d]; !dup {
				seen[d] = struct{}{}
				if kept != nil {
					kept = append(kept, vh.Domains[j])
				}
				continue
			}
			if kept == nil {
				kept = append(make([]string, 0, len(vh.Domains)-1), vh.Domains[:j]...)
			}
		}
		if kept != nil {
			c := proto.Clone(vh).(*routev3.VirtualHost)
			c.Domains = kept
			rc.VirtualHosts[i] = c
		}
	}
}
