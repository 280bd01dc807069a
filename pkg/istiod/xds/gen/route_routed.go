package gen

import (
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// routedHosts caches, encoded, the virtual hosts of service ports that a
// VirtualService routes: per VirtualService, host, port and whether the
// scope is the service's namespace, a few variants. A variant keeps what
// its build read of its scope (the service and DestinationRule of each
// destination), and a scope that reads the same takes it. Scopes read
// alike unless a Sidecar, an exportTo or a namespace's own rule sets them
// apart.
var routedHosts = model.NewMemo[routedKey, *routedVariants]()

// maxVariants bounds the variants kept of one key; a scope that matches
// none past it builds its own host.
const maxVariants = 8

type routedKey struct {
	vs    *networking.VirtualService
	host  string
	port  uint16
	local bool   // the scope is the service's namespace
	src   string // the outcome of vs's matches on sources (sourceOutcomes)
}

type routedVariants struct {
	mu   sync.Mutex
	list []routedVariant
}

type routedVariant struct {
	reads []scopeRead
	host  *sharedHost
}

// scopeRead is what a scope gives for one host: its service as the scope
// sees it, and its DestinationRule.
type scopeRead struct {
	host string
	svc  *model.Service
	dr   *networking.DestinationRule
}

func readScope(sc *model.Scope, host string) scopeRead {
	return scopeRead{host: host, svc: sc.Service(host), dr: sc.DestinationRule[host]}
}

// readsAlike reports whether sc gives what reads record.
func readsAlike(sc *model.Scope, reads []scopeRead) bool {
	for _, r := range reads {
		if readScope(sc, r.host) != r {
			return false
		}
	}
	return true
}

// routedHost is the virtual host of svc:port, which vs routes, shared with
// the scopes that read alike.
func (b *routeBuilder) routedHost(vs *networking.VirtualService, svc *model.Service, port uint16) vhostPart {
	build := func() *routev3.VirtualHost { return b.buildHost(svc, port) }
	k := routedKey{vs: vs, host: svc.Hostname, port: port, local: svc.Namespace == b.scope.Namespace, src: b.sourceOutcomes(vs)}
	vars := routedHosts.Get(b.pc, k, func() *routedVariants { return &routedVariants{} })
	vars.mu.Lock()
	defer vars.mu.Unlock()
	for _, v := range vars.list {
		if readsAlike(b.scope, v.reads) {
			return vhostPart{shared: v.host, build: build}
		}
	}
	if len(vars.list) == maxVariants {
		return vhostPart{own: build()}
	}
	var reads []scopeRead
	rb := *b
	rb.reads = &reads
	h := encodeHost(rb.buildHost(svc, port), b.alone(svc))
	vars.list = append(vars.list, routedVariant{reads: reads, host: h})
	return vhostPart{shared: h, build: build}
}
