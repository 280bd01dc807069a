package kube

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	netlisters "istio.io/client-go/pkg/listers/networking/v1"
	seclisters "istio.io/client-go/pkg/listers/security/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// listers read the informer caches; Istio listers are nil when their CRD
// is not installed.
type listers struct {
	services         corelisters.ServiceLister
	slices           discoverylisters.EndpointSliceLister
	pods             lister[*cachedPod]
	serviceEntries   netlisters.ServiceEntryLister
	workloadEntries  netlisters.WorkloadEntryLister
	virtualServices  netlisters.VirtualServiceLister
	destinationRules netlisters.DestinationRuleLister
	sidecars         netlisters.SidecarLister

	peerAuthentications    seclisters.PeerAuthenticationLister
	authorizationPolicies  seclisters.AuthorizationPolicyLister
	requestAuthentications seclisters.RequestAuthenticationLister
}

// kinds are the kinds the listers read, in the order problems are listed.
var kinds = []model.Kind{model.KindService, model.KindEndpointSlice, model.KindPod, model.KindServiceEntry,
	model.KindWorkloadEntry, model.KindVirtualService, model.KindDestinationRule, model.KindSidecar,
	model.KindPeerAuthentication, model.KindAuthorizationPolicy, model.KindRequestAuthentication}

// lister is what every typed lister has.
type lister[T model.Named] interface {
	List(labels.Selector) ([]T, error)
}

// build returns the inputs: prev's (none when nil), with the kinds in
// dirty listed again. Each listed kind is sorted by namespace
// and name, since a cache lists in no order, so an object that did not
// change keeps its place; its invalid objects replace the kind's problems.
func (l *listers) build(prev *model.Inputs, dirty map[model.Kind]bool, problems map[model.Kind][]error) *model.Inputs {
	in := &model.Inputs{}
	if prev != nil {
		*in = *prev
	}
	relist(model.KindService, l.services, &in.Services, accepted, dirty, problems)
	relist(model.KindEndpointSlice, l.slices, &in.EndpointSlices, accepted, dirty, problems)
	relist(model.KindPod, l.pods, &in.Pods, cachedPodOf, dirty, problems)
	relist(model.KindServiceEntry, l.serviceEntries, &in.ServiceEntries, accepted, dirty, problems)
	relist(model.KindWorkloadEntry, l.workloadEntries, &in.WorkloadEntries, accepted, dirty, problems)
	relist(model.KindVirtualService, l.virtualServices, &in.VirtualServices, accepted, dirty, problems)
	relist(model.KindDestinationRule, l.destinationRules, &in.DestinationRules, accepted, dirty, problems)
	relist(model.KindSidecar, l.sidecars, &in.Sidecars, accepted, dirty, problems)
	relist(model.KindPeerAuthentication, l.peerAuthentications, &in.PeerAuthentications, accepted, dirty, problems)
	relist(model.KindAuthorizationPolicy, l.authorizationPolicies, &in.AuthorizationPolicies, accepted, dirty, problems)
	relist(model.KindRequestAuthentication, l.requestAuthentications, &in.RequestAuthentications, accepted, dirty, problems)
	return in
}

// relist lists kind into dst when it is dirty: sorted, invalid objects left
// out and reported. A nil lister (its CRD not installed) lists nothing. use
// checks an object and returns what the inputs keep of it.
func relist[T model.Named, U any](kind model.Kind, l lister[T], dst *[]U, use func(T) (U, error), dirty map[model.Kind]bool, problems map[model.Kind][]error) {
	if l == nil || !dirty[kind] {
		return
	}
	objs, err := l.List(everything)
	if err != nil {
		return
	}
	slices.SortFunc(objs, func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	var p []error
	out := make([]U, 0, len(objs))
	for _, o := range objs {
		u, err := use(o)
		if err != nil {
			p = append(p, fmt.Errorf("%s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err))
			continue
		}
		out = append(out, u)
	}
	*dst, problems[kind] = out, p
}

// accepted keeps an object whole once validation accepts it.
func accepted[T model.Named](o T) (T, error) { return o, validation.Accept(any(o)) }

// cachedPodOf keeps what istiod reads of a pod; its validation ran when the
// informer cached it.
func cachedPodOf(c *cachedPod) (*model.Pod, error) { return &c.pod, c.invalid }
