package gen

import (
	"slices"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// A VirtualService's match may name its sources: the gateways it applies
// to ("mesh" for every sidecar), the labels and the namespace of the
// workload the request comes from. A sidecar keeps the routes whose
// sources it is, as Istio does. What a sidecar builds from its scope is
// shared by the sidecars for which the same of those conditions hold: a
// view is a scope with the outcome of each condition that depends on the
// workload (source), usually none.

// view names what a sidecar's outbound listeners and routes are built
// from: its scope, and src (sourceOutcomes over the scope's services).
type view struct {
	scope *model.Scope
	src   string
}

// meshGateway is the gateway name that stands for every sidecar.
const meshGateway = "mesh"

// httpFromHere reports whether an HTTP match applies to b's proxies, as
// Istio decides it: a match that lists gateways applies where one of them
// is "mesh", whatever its other conditions say; otherwise the proxy's
// labels include its source labels and the proxy is in its source
// namespace, if it names one.
func (b *routeBuilder) httpFromHere(m *apinet.HTTPMatchRequest) bool {
	if m == nil {
		return true
	}
	if len(m.GetGateways()) > 0 {
		return slices.Contains(m.GetGateways(), meshGateway)
	}
	return b.sourceIs(m.GetSourceLabels(), m.GetSourceNamespace())
}

// l4FromHere is httpFromHere for a TCP or TLS match: every condition
// holds, gateways included.
func (b *routeBuilder) l4FromHere(gateways []string, labels map[string]string, ns string) bool {
	return (len(gateways) == 0 || slices.Contains(gateways, meshGateway)) && b.sourceIs(labels, ns)
}

// sourceIs reports whether b's proxies carry labels and are in ns ("":
// any).
func (b *routeBuilder) sourceIs(labels map[string]string, ns string) bool {
	if ns != "" && ns != b.scope.Namespace {
		return false
	}
	for k, v := range labels {
		if w, ok := b.labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sourceOutcomes is, for the matches of vs whose outcome depends on the
// proxy (source labels or namespace, outside gateways that decide alone),
// whether each holds for b's proxies: one byte each, in the order of its
// HTTP, TCP and TLS routes; "" when none depends on the proxy. Sidecars
// with the same outcomes get the same routes from vs.
func (b *routeBuilder) sourceOutcomes(vs *networking.VirtualService) string {
	var out []byte
	add := func(depends, holds bool) {
		if !depends {
			return
		}
		if holds {
			out = append(out, '1')
		} else {
			out = append(out, '0')
		}
	}
	for _, hr := range vs.Spec.GetHttp() {
		for _, m := range hr.GetMatch() {
			add(len(m.GetGateways()) == 0 && sourceDependent(m.GetSourceLabels(), m.GetSourceNamespace()), b.httpFromHere(m))
		}
	}
	for _, tr := range vs.Spec.GetTcp() {
		for _, m := range tr.GetMatch() {
			add(sourceDependent(m.GetSourceLabels(), m.GetSourceNamespace()), b.l4FromHere(m.GetGateways(), m.GetSourceLabels(), m.GetSourceNamespace()))
		}
	}
	for _, tr := range vs.Spec.GetTls() {
		for _, m := range tr.GetMatch() {
			add(sourceDependent(m.GetSourceLabels(), m.GetSourceNamespace()), b.l4FromHere(m.GetGateways(), m.GetSourceLabels(), m.GetSourceNamespace()))
		}
	}
	return string(out)
}

func sourceDependent(labels map[string]string, ns string) bool { return len(labels) > 0 || ns != "" }

// sourceServices caches, per scope, the VirtualServices it routes by
// whose matches depend on the proxy, in the order of the scope's hosts.
var sourceServices = model.NewMemo[*model.Scope, []*networking.VirtualService]()

// viewOf is the view of a sidecar in scope sc with labels.
func viewOf(pc *model.PushContext, sc *model.Scope, labels map[string]string) view {
	vss := sourceServices.Get(pc, sc, func() []*networking.VirtualService {
		var out []*networking.VirtualService
		b := &routeBuilder{scope: sc}
		for _, svc := range sc.Services {
			if vs := sc.VirtualService[svc.Hostname]; vs != nil && !slices.Contains(out, vs) && b.sourceOutcomes(vs) != "" {
				out = append(out, vs)
			}
		}
		return out
	})
	if len(vss) == 0 {
		return view{scope: sc}
	}
	b := &routeBuilder{scope: sc, labels: labels}
	src := ""
	for _, vs := range vss {
		src += b.sourceOutcomes(vs) + "|"
	}
	return view{scope: sc, src: src}
}
