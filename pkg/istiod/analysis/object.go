package analysis

import (
	"slices"

	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// ForObject analyzes one object (JSON, as an AdmissionReview carries it)
// as if it were added to in, replacing the object of the same kind,
// namespace and name: it returns the object's key and the messages about
// it. Objects without a namespace get ns; an object of a kind nothing
// reads gets an empty key and no messages. in is not modified.
func ForObject(in *model.Inputs, raw []byte, ns string) (model.Key, []Message, error) {
	s := &Set{}
	if in != nil {
		s.Inputs = *in
	}
	probe := &Set{}
	k, err := probe.AddJSON(raw, ns, "")
	if err != nil || k.Kind == "" {
		return k, nil, err
	}
	s.remove(k)
	if _, err := s.AddJSON(raw, ns, ""); err != nil {
		return k, nil, err
	}
	return k, For(AnalyzeSet(s), k), nil
}

// remove drops the object with key k (the slices are copied, never
// edited in place: they may be shared with a registry's Inputs).
func (s *Set) remove(k model.Key) {
	switch k.Kind {
	case model.KindService:
		s.Services = without(s.Services, k)
	case model.KindPod:
		s.Pods = without(s.Pods, k)
	case model.KindServiceEntry:
		s.ServiceEntries = without(s.ServiceEntries, k)
	case model.KindWorkloadEntry:
		s.WorkloadEntries = without(s.WorkloadEntries, k)
	case model.KindVirtualService:
		s.VirtualServices = without(s.VirtualServices, k)
	case model.KindDestinationRule:
		s.DestinationRules = without(s.DestinationRules, k)
	case model.KindSidecar:
		s.Sidecars = without(s.Sidecars, k)
	case model.KindPeerAuthentication:
		s.PeerAuthentications = without(s.PeerAuthentications, k)
	case model.KindAuthorizationPolicy:
		s.AuthorizationPolicies = without(s.AuthorizationPolicies, k)
	case model.KindRequestAuthentication:
		s.RequestAuthentications = without(s.RequestAuthentications, k)
	case KindGateway:
		if s.Gateways != nil {
			s.Gateways = without(s.Gateways, k)
		}
	}
}

func without[T model.Named](xs []T, k model.Key) []T {
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if x.GetNamespace() != k.Namespace || x.GetName() != k.Name {
			out = append(out, x)
		}
	}
	return out
}

// Merge adds o's objects to s; an object of o replaces the object of s
// with the same key (files given to istioctl analyze over the cluster's
// objects).
func (s *Set) Merge(o *Set) {
	for _, k := range o.keys() {
		s.remove(k)
	}
	s.Services = append(s.Services, o.Services...)
	s.EndpointSlices = append(s.EndpointSlices, o.EndpointSlices...)
	s.Pods = append(s.Pods, o.Pods...)
	s.ServiceEntries = append(s.ServiceEntries, o.ServiceEntries...)
	s.WorkloadEntries = append(s.WorkloadEntries, o.WorkloadEntries...)
	s.VirtualServices = append(s.VirtualServices, o.VirtualServices...)
	s.DestinationRules = append(s.DestinationRules, o.DestinationRules...)
	s.Sidecars = append(s.Sidecars, o.Sidecars...)
	s.PeerAuthentications = append(s.PeerAuthentications, o.PeerAuthentications...)
	s.AuthorizationPolicies = append(s.AuthorizationPolicies, o.AuthorizationPolicies...)
	s.RequestAuthentications = append(s.RequestAuthentications, o.RequestAuthentications...)
	if o.Gateways != nil {
		s.Gateways = append(slices.Clip(s.Gateways), o.Gateways...)
		if s.Gateways == nil {
			s.Gateways = []*networking.Gateway{}
		}
	}
	for _, k := range o.Unread {
		s.Unread = slices.DeleteFunc(s.Unread, func(u model.Key) bool { return u == k })
	}
	s.Unread = append(s.Unread, o.Unread...)
	for k, v := range o.Origins {
		s.origin(k, v)
	}
}

// keys lists the keys of the objects in s that remove knows.
func (s *Set) keys() []model.Key {
	var out []model.Key
	add := func(kind model.Kind, m model.Named) {
		out = append(out, model.Key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
	}
	for _, o := range s.Services {
		add(model.KindService, o)
	}
	for _, o := range s.Pods {
		add(model.KindPod, o)
	}
	for _, o := range s.ServiceEntries {
		add(model.KindServiceEntry, o)
	}
	for _, o := range s.WorkloadEntries {
		add(model.KindWorkloadEntry, o)
	}
	for _, o := range s.VirtualServices {
		add(model.KindVirtualService, o)
	}
	for _, o := range s.DestinationRules {
		add(model.KindDestinationRule, o)
	}
	for _, o := range s.Sidecars {
		add(model.KindSidecar, o)
	}
	for _, o := range s.PeerAuthentications {
		add(model.KindPeerAuthentication, o)
	}
	for _, o := range s.AuthorizationPolicies {
		add(model.KindAuthorizationPolicy, o)
	}
	for _, o := range s.RequestAuthentications {
		add(model.KindRequestAuthentication, o)
	}
	for _, o := range s.Gateways {
		add(KindGateway, o)
	}
	return out
}
