package model

import (
	"fmt"

	meshconfig "istio.io/api/mesh/v1alpha1"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Kind names a type of object istiod reads.
type Kind string

// The kinds istiod reads, by their Kubernetes kind names.
const (
	KindService         Kind = "Service"
	KindEndpointSlice   Kind = "EndpointSlice"
	KindPod             Kind = "Pod"
	KindServiceEntry    Kind = "ServiceEntry"
	KindWorkloadEntry   Kind = "WorkloadEntry"
	KindVirtualService  Kind = "VirtualService"
	KindDestinationRule Kind = "DestinationRule"
	KindSidecar         Kind = "Sidecar"
	// The security.istio.io kinds.
	KindPeerAuthentication    Kind = "PeerAuthentication"
	KindAuthorizationPolicy   Kind = "AuthorizationPolicy"
	KindRequestAuthentication Kind = "RequestAuthentication"
)

// Key identifies one object.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String returns "Kind ns/name".
func (k Key) String() string { return fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name) }

// Named is what objects of every kind have: Kubernetes and Istio objects,
// and Pod.
type Named interface {
	GetNamespace() string
	GetName() string
}

// Inputs is one consistent set of registry and configuration objects. A
// registry hands over a new Inputs on every change and never mutates one it
// has handed over; objects that did not change keep their pointers.
type Inputs struct {
	// Mesh is the mesh configuration (nil: Istio's defaults). A new value
	// is a new pointer, so a change of it is a configuration change.
	Mesh *meshconfig.MeshConfig
	// Domain is the cluster's DNS domain (Istio's --domain, "" is
	// DefaultDomain): Kubernetes services are named NAME.NS.svc.DOMAIN and
	// short hosts in configuration resolve under it.
	Domain           string
	Services         []*corev1.Service
	EndpointSlices   []*discoveryv1.EndpointSlice
	Pods             []*Pod
	ServiceEntries   []*networking.ServiceEntry
	WorkloadEntries  []*networking.WorkloadEntry
	VirtualServices  []*networking.VirtualService
	DestinationRules []*networking.DestinationRule
	Sidecars         []*networking.Sidecar
	// Security policy (security.istio.io; v1beta1 objects are read into
	// the v1 types, whose specs are the same).
	PeerAuthentications    []*security.PeerAuthentication
	AuthorizationPolicies  []*security.AuthorizationPolicy
	RequestAuthentications []*security.RequestAuthentication
}

// Count returns the number of objects in in.
func (in *Inputs) Count() int {
	return len(in.Services) + len(in.EndpointSlices) + len(in.Pods) + len(in.ServiceEntries) +
		len(in.WorkloadEntries) + len(in.VirtualServices) + len(in.DestinationRules) + len(in.Sidecars) +
		len(in.PeerAuthentications) + len(in.AuthorizationPolicies) + len(in.RequestAuthentications)
}
