package analysis

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	}
}

func without[T metav1.Object](xs []T, k model.Key) []T {
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if x.GetNamespace() != k.Namespace || x.GetName() != k.Name {
			out = append(out, x)
		}
	}
	return out
}
