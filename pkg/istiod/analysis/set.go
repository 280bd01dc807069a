package analysis

import (
	"google.golang.org/protobuf/proto"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// RootNamespace is the mesh's configuration root: policies there apply to
// every namespace.
const RootNamespace = "istio-system"

// Set is everything analyzed: what istiod reads (model.Inputs) and the
// kinds it does not read yet or at all, which the webhook and istioctl
// analyze see. Short hosts are qualified in the Inputs' Domain (""
// is model.DefaultDomain).
type Set struct {
	model.Inputs
	// Gateways, when non-nil, are all the Gateways there are: gateway
	// references of VirtualServices are checked against them. Nil means
	// unknown (istiod does not read Gateways), and references are not
	// checked.
	Gateways []*networking.Gateway
	// Unread are objects of Istio kinds istiod does not read at all
	// (EnvoyFilter, WasmPlugin, Telemetry, ProxyConfig, WorkloadGroup,
	// Gateway...).
	Unread []model.Key
	// Origins say where objects were read (file:line), for messages.
	Origins map[model.Key]string

	// sources are the parsed YAML documents of objects read from files,
	// for the lines of fields.
	sources map[model.Key]*source
}

// object is one Istio object with its spec, as the support table sees it.
type object struct {
	key      model.Key
	spec     proto.Message
	selector map[string]string // workload selector labels; nil: none
	scoped   bool              // applies to its namespace only (or the mesh from the root namespace)
}

func key(kind model.Kind, m metav1.ObjectMeta) model.Key {
	return model.Key{Kind: kind, Namespace: m.Namespace, Name: m.Name}
}

// objects lists the objects the support table applies to.
func (s *Set) objects() []object {
	var out []object
	for _, o := range s.VirtualServices {
		out = append(out, object{key: key(model.KindVirtualService, o.ObjectMeta), spec: &o.Spec})
	}
	for _, o := range s.DestinationRules {
		var sel map[string]string
		if ws := o.Spec.GetWorkloadSelector(); ws != nil {
			sel = ws.GetMatchLabels()
		}
		out = append(out, object{key: key(model.KindDestinationRule, o.ObjectMeta), spec: &o.Spec, selector: sel})
	}
	for _, o := range s.ServiceEntries {
		out = append(out, object{key: key(model.KindServiceEntry, o.ObjectMeta), spec: &o.Spec})
	}
	for _, o := range s.WorkloadEntries {
		out = append(out, object{key: key(model.KindWorkloadEntry, o.ObjectMeta), spec: &o.Spec})
	}
	for _, o := range s.Sidecars {
		var sel map[string]string
		if ws := o.Spec.GetWorkloadSelector(); ws != nil {
			sel = ws.GetLabels()
		}
		out = append(out, object{key: key(model.KindSidecar, o.ObjectMeta), spec: &o.Spec, selector: sel, scoped: true})
	}
	for _, o := range s.PeerAuthentications {
		out = append(out, object{key: key(model.KindPeerAuthentication, o.ObjectMeta), spec: &o.Spec, selector: o.Spec.GetSelector().GetMatchLabels(), scoped: true})
	}
	for _, o := range s.AuthorizationPolicies {
		out = append(out, object{key: key(model.KindAuthorizationPolicy, o.ObjectMeta), spec: &o.Spec, selector: o.Spec.GetSelector().GetMatchLabels(), scoped: true})
	}
	for _, o := range s.RequestAuthentications {
		out = append(out, object{key: key(model.KindRequestAuthentication, o.ObjectMeta), spec: &o.Spec, selector: o.Spec.GetSelector().GetMatchLabels(), scoped: true})
	}
	return out
}

// KindGateway is the Gateway kind (istiod does not read it).
const KindGateway model.Kind = "Gateway"
