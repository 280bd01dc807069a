package kube

import (
	"fmt"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	netlisters "istio.io/client-go/pkg/listers/networking/v1"
	seclisters "istio.io/client-go/pkg/listers/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
	pods             corelisters.PodLister
	serviceEntries   netlisters.ServiceEntryLister
	workloadEntries  netlisters.WorkloadEntryLister
	virtualServices  netlisters.VirtualServiceLister
	destinationRules netlisters.DestinationRuleLister
	sidecars         netlisters.SidecarLister

	peerAuthentications    seclisters.PeerAuthenticationLister
	authorizationPolicies  seclisters.AuthorizationPolicyLister
	requestAuthentications seclisters.RequestAuthenticationLister
}

// keep validates objs, returning the valid ones and a problem per invalid one.
func keep[T interface {
	GetNamespace() string
	GetName() string
}](kind model.Kind, objs []T, problems *[]error) []T {
	out := objs[:0:0]
	for _, o := range objs {
		if err := validation.Accept(any(o)); err != nil {
			*problems = append(*problems, fmt.Errorf("%s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err))
			continue
		}
		out = append(out, o)
	}
	return out
}

func (l *listers) build() (*model.Inputs, []error) {
	var problems []error
	in := &model.Inputs{}
	if svcs, err := l.services.List(everything); err == nil {
		in.Services = keep[*corev1.Service](model.KindService, svcs, &problems)
	}
	if sl, err := l.slices.List(everything); err == nil {
		in.EndpointSlices = keep[*discoveryv1.EndpointSlice](model.KindEndpointSlice, sl, &problems)
	}
	if pods, err := l.pods.List(everything); err == nil {
		in.Pods = keep[*corev1.Pod](model.KindPod, pods, &problems)
	}
	if l.serviceEntries != nil {
		if v, err := l.serviceEntries.List(everything); err == nil {
			in.ServiceEntries = keep[*networking.ServiceEntry](model.KindServiceEntry, v, &problems)
		}
	}
	if l.workloadEntries != nil {
		if v, err := l.workloadEntries.List(everything); err == nil {
			in.WorkloadEntries = keep[*networking.WorkloadEntry](model.KindWorkloadEntry, v, &problems)
		}
	}
	if l.virtualServices != nil {
		if v, err := l.virtualServices.List(everything); err == nil {
			in.VirtualServices = keep[*networking.VirtualService](model.KindVirtualService, v, &problems)
		}
	}
	if l.destinationRules != nil {
		if v, err := l.destinationRules.List(everything); err == nil {
			in.DestinationRules = keep[*networking.DestinationRule](model.KindDestinationRule, v, &problems)
		}
	}
	if l.sidecars != nil {
		if v, err := l.sidecars.List(everything); err == nil {
			in.Sidecars = keep[*networking.Sidecar](model.KindSidecar, v, &problems)
		}
	}
	if l.peerAuthentications != nil {
		if v, err := l.peerAuthentications.List(everything); err == nil {
			in.PeerAuthentications = keep[*security.PeerAuthentication](model.KindPeerAuthentication, v, &problems)
		}
	}
	if l.authorizationPolicies != nil {
		if v, err := l.authorizationPolicies.List(everything); err == nil {
			in.AuthorizationPolicies = keep[*security.AuthorizationPolicy](model.KindAuthorizationPolicy, v, &problems)
		}
	}
	if l.requestAuthentications != nil {
		if v, err := l.requestAuthentications.List(everything); err == nil {
			in.RequestAuthentications = keep[*security.RequestAuthentication](model.KindRequestAuthentication, v, &problems)
		}
	}
	return in, problems
}
