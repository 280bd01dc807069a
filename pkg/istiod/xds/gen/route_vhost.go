package gen

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// defaultHosts caches the virtual host of a service port that no
// VirtualService routes, encoded: its one route reads nothing of the scope
// but the service's DestinationRule, and its domains only whether the
// scope is the service's namespace (the short names). Every scope of a
// mesh without Sidecars sees most services so, and their route
// configurations are assembled from the shared bytes.
var defaultHosts = model.NewMemo[vhostKey, *sharedHost]()

// vhostKey names a default virtual host.
type vhostKey struct {
	host  string
	port  uint16
	dr    *networking.DestinationRule
	local bool // the scope is the service's namespace
}

// sharedHost is a virtual host encoded once, as an element of a
// RouteConfiguration's virtual_hosts (field 2), with the domains that
// dedupeDomains reads (folded: all in lower case already; alone: none
// that another service's host may claim); err when it does not marshal.
type sharedHost struct {
	domains []string
	folded  bool
	alone   bool
	entry   []byte
	err     error
}

// vhostPart is one virtual host of a route configuration being assembled:
// a shared one, or one of the scope's own.
type vhostPart struct {
	shared *sharedHost
	own    *routev3.VirtualHost
	// build builds the host again, for a shared one that loses domains.
	build func() *routev3.VirtualHost
}

// domains are p's domains, and whether they are all in lower case.
func (p vhostPart) domains() ([]string, bool) {
	if p.shared != nil {
		return p.shared.domains, p.shared.folded
	}
	return p.own.Domains, false
}

// folded reports whether every domain of ds is in lower case.
func folded(ds []string) bool {
	for _, d := range ds {
		if strings.ToLower(d) != d {
			return false
		}
	}
	return true
}

// virtualHost is the virtual host of svc:port as b's scope sees it.
func (b *routeBuilder) virtualHost(svc *model.Service, port uint16) vhostPart {
	vs := b.scope.VirtualService[svc.Hostname]
	switch {
	case b.grpc:
		return vhostPart{own: b.buildHost(svc, port)}
	case vs != nil && len(vs.Spec.GetHttp()) > 0:
		return b.routedHost(vs, svc, port)
	}
	build := func() *routev3.VirtualHost { return b.buildHost(svc, port) }
	k := vhostKey{host: svc.Hostname, port: port, dr: b.scope.DestinationRule[svc.Hostname], local: svc.Namespace == b.scope.Namespace}
	return vhostPart{build: build, shared: defaultHosts.Get(b.pc, k, func() *sharedHost { return encodeHost(build(), b.alone(svc)) })}
}

// buildHost builds the virtual host of svc:port.
func (b *routeBuilder) buildHost(svc *model.Service, port uint16) *routev3.VirtualHost {
	return &routev3.VirtualHost{
		Name:                       svc.Hostname + ":" + strconv.Itoa(int(port)),
		Domains:                    domains(svc, b.scope.Namespace),
		Routes:                     b.routes(svc, port),
		IncludeRequestAttemptCount: attemptCount(b.pc.Mesh),
	}
}

// alone reports whether no other virtual host of the push may claim a
// domain of svc's, as b's scope names it.
func (b *routeBuilder) alone(svc *model.Service) bool {
	return contested(b.pc).alone(hostNames(svc, b.scope.Namespace))
}

// encodeHost encodes vh to be shared; alone as routeBuilder.alone.
func encodeHost(vh *routev3.VirtualHost, alone bool) *sharedHost {
	enc, err := deterministic.Marshal(vh)
	if err != nil {
		return &sharedHost{err: fmt.Errorf("marshal virtual host %s: %w", vh.Name, err)}
	}
	entry := protowire.AppendTag(make([]byte, 0, protowire.SizeTag(2)+protowire.SizeBytes(len(enc))), 2, protowire.BytesType)
	return &sharedHost{domains: vh.Domains, folded: folded(vh.Domains), alone: alone,
		entry: protowire.AppendBytes(entry, enc)}
}

// dedupeDomains drops domains already claimed by an earlier virtual host:
// Envoy rejects a route configuration with a domain twice. A shared host
// that loses domains is built again as the scope's own.
func dedupeDomains(parts []vhostPart) {
	seen := seenDomains.Get().(map[string]struct{})
	defer func() {
		clear(seen)
		seenDomains.Put(seen)
	}()
	for i, p := range parts {
		if p.shared != nil && p.shared.alone {
			continue // no other host has its domains
		}
		ds, lower := p.domains()
		var kept []string
		for j, d := range ds {
			k := d
			if !lower {
				k = strings.ToLower(d)
			}
			n := len(seen)
			seen[k] = struct{}{}
			if len(seen) > n { // k is new: one hash where a lookup and an insert took two
				if kept != nil {
					kept = append(kept, d)
				}
				continue
			}
			if kept == nil {
				kept = append(make([]string, 0, len(ds)-1), ds[:j]...)
			}
		}
		if kept == nil {
			continue
		}
		if p.shared != nil {
			p = vhostPart{own: p.build()}
		}
		p.own.Domains = kept
		parts[i] = p
	}
}

// seenDomains holds dedupeDomains' sets for reuse: a route configuration
// of every service is built once per scope and push, and its set has a
// domain or more per name and address of each.
var seenDomains = sync.Pool{New: func() any { return map[string]struct{}{} }}

// outboundRouteOptions are the fields Istio 1.31 sets on a sidecar's
// outbound route configuration besides its name and virtual hosts, encoded
// (fields 7, 11 and 14, after those): clusters not validated, direct
// responses up to 1 MiB, and the port ignored in host matching, which
// lets each virtual host list its names without ports.
var outboundRouteOptions = func() []byte {
	b, err := deterministic.Marshal(&routev3.RouteConfiguration{
		ValidateClusters:               wrapperspb.Bool(false),
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(1 << 20),
		IgnorePortInHostMatching:       true,
	})
	if err != nil {
		panic(err)
	}
	return b
}()

// routeConfiguration assembles the outbound RouteConfiguration name of
// parts, with the bytes deterministic marshaling gives (name, field 1,
// then each virtual host in order, field 2, then outboundRouteOptions).
func routeConfiguration(name string, parts []vhostPart) *Resource {
	own := make([][]byte, len(parts))
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(name)) + len(outboundRouteOptions)
	for i, p := range parts {
		if p.shared != nil {
			if p.shared.err != nil {
				return failedResource(name, p.shared.err)
			}
			size += len(p.shared.entry)
			continue
		}
		enc, err := deterministic.Marshal(p.own)
		if err != nil {
			return failedResource(name, fmt.Errorf("marshal virtual host %s: %w", p.own.Name, err))
		}
		own[i] = enc
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(enc))
	}
	b := anyEntry(RouteType, size)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, name)
	for i, p := range parts {
		if p.shared != nil {
			b = append(b, p.shared.entry...)
			continue
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, own[i])
	}
	b = append(b, outboundRouteOptions...)
	return entryResource(name, RouteType, b, size)
}
