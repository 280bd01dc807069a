package validation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/duration"
	"google.golang.org/protobuf/proto"
	apinet "istio.io/api/networking/v1alpha3"
	apisec "istio.io/api/security/v1beta1"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API groups whose kinds are validated.
const (
	NetworkingGroup = "networking.istio.io"
	SecurityGroup   = "security.istio.io"
)

// Error is a refused object: its identity and one error per problem.
type Error struct {
	// Kind, Namespace and Name identify the object.
	Kind, Namespace, Name string
	// Errors are the problems, mostly *FieldError.
	Errors []error
}

// Error lists the problems: "Kind ns/name: field: value: reason; ...".
func (e *Error) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%s %s/%s: %s", e.Kind, e.Namespace, e.Name, strings.Join(msgs, "; "))
}

// Unwrap returns the problems.
func (e *Error) Unwrap() []error { return e.Errors }

// SubsetLookup knows the DestinationRules of the mesh.
type SubsetLookup interface {
	// Subsets returns the subset names the DestinationRules for host (a
	// fully qualified name) define, and whether any DestinationRule for
	// host is known at all.
	Subsets(host string) (names []string, known bool)
}

// Validator checks Istio objects. The zero value checks syntax and fields
// but not subset references.
type Validator struct {
	// Subsets, when set, is where subset references are looked up.
	Subsets SubsetLookup
	// DomainSuffix is the cluster domain short host names are qualified in
	// ("" is model.DefaultDomain, cluster.local).
	DomainSuffix string
}

// Kinds returns the kinds the Validator knows, by group.
func Kinds() map[string][]string {
	return map[string][]string{
		NetworkingGroup: {"VirtualService", "DestinationRule", "ServiceEntry", "Sidecar", "Gateway", "WorkloadEntry", "WorkloadGroup"},
		SecurityGroup:   {"PeerAuthentication", "AuthorizationPolicy", "RequestAuthentication"},
	}
}

// doc is an Istio object with its spec left raw for protojson.
type doc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Status     json.RawMessage   `json:"status,omitempty"`
}

// specFor returns an empty spec message for a kind, or nil if unknown.
func specFor(group, kind string) proto.Message {
	switch group + "/" + kind {
	case NetworkingGroup + "/VirtualService":
		return &apinet.VirtualService{}
	case NetworkingGroup + "/DestinationRule":
		return &apinet.DestinationRule{}
	case NetworkingGroup + "/ServiceEntry":
		return &apinet.ServiceEntry{}
	case NetworkingGroup + "/Sidecar":
		return &apinet.Sidecar{}
	case NetworkingGroup + "/Gateway":
		return &apinet.Gateway{}
	case NetworkingGroup + "/WorkloadEntry":
		return &apinet.WorkloadEntry{}
	case NetworkingGroup + "/WorkloadGroup":
		return &apinet.WorkloadGroup{}
	case SecurityGroup + "/PeerAuthentication":
		return &apisec.PeerAuthentication{}
	case SecurityGroup + "/AuthorizationPolicy":
		return &apisec.AuthorizationPolicy{}
	case SecurityGroup + "/RequestAuthentication":
		return &apisec.RequestAuthentication{}
	}
	return nil
}

// ValidateJSON checks one object given as JSON (an AdmissionReview's
// object). gvk says what the API server thinks it is; an object of a group
// or kind the Validator does not know is accepted (nil). ns is used when
// the object has no namespace.
func (v *Validator) ValidateJSON(gvk schema.GroupVersionKind, ns string, raw []byte) error {
	spec := specFor(gvk.Group, gvk.Kind)
	if spec == nil {
		return nil
	}
	var d doc
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		return &Error{Kind: gvk.Kind, Namespace: ns, Errors: []error{&FieldError{Field: "object", Value: "...", Reason: "not a " + gvk.Kind + ": " + err.Error()}}}
	}
	if d.Metadata.Namespace == "" {
		d.Metadata.Namespace = ns
	}
	fail := func(es []error) error {
		if len(es) == 0 {
			return nil
		}
		return &Error{Kind: gvk.Kind, Namespace: d.Metadata.Namespace, Name: d.Metadata.Name, Errors: es}
	}
	if len(bytes.TrimSpace(d.Spec)) == 0 || string(bytes.TrimSpace(d.Spec)) == "null" {
		return fail([]error{&FieldError{Field: "spec", Value: "null", Reason: "required"}})
	}
	if err := duration.Unmarshal(d.Spec, spec); err != nil {
		return fail([]error{&FieldError{Field: "spec", Value: "...", Reason: "does not parse as " + gvk.Kind + ": " + err.Error()}})
	}
	return fail(v.check(d.Metadata, spec))
}

// Validate checks a typed spec of an object with metadata meta at the
// Webhook level.
func (v *Validator) Validate(meta metav1.ObjectMeta, spec proto.Message) error {
	es := v.check(meta, spec)
	if len(es) == 0 {
		return nil
	}
	kind := string(spec.ProtoReflect().Descriptor().Name())
	return &Error{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Errors: es}
}

// check returns the Webhook-level problems of an object, sorted by field
// for stable messages.
func (v *Validator) check(meta metav1.ObjectMeta, spec proto.Message) []error {
	c := &checker{level: Webhook, v: v, ns: meta.Namespace}
	c.object(meta, spec)
	slices.SortStableFunc(c.errs, func(a, b error) int { return strings.Compare(fieldOf(a), fieldOf(b)) })
	return c.errs
}

// Accept checks an object the way istiod needs it to use it: Services,
// EndpointSlices and Pods (core/v1, discovery/v1) and the
// networking.istio.io/v1 kinds the registries read. The error joins one
// *FieldError per problem.
func Accept(obj any) error {
	c := &checker{level: Istiod, v: &Validator{}}
	switch o := obj.(type) {
	case *corev1.Service:
		c.meta(o.ObjectMeta)
		c.service(o)
	case *discoveryv1.EndpointSlice:
		c.meta(o.ObjectMeta)
		c.endpointSlice(o)
	case *corev1.Pod:
		c.meta(o.ObjectMeta)
		c.pod(o)
	case *networking.ServiceEntry:
		c.object(o.ObjectMeta, &o.Spec)
	case *networking.WorkloadEntry:
		c.object(o.ObjectMeta, &o.Spec)
	case *networking.VirtualService:
		c.object(o.ObjectMeta, &o.Spec)
	case *networking.DestinationRule:
		c.object(o.ObjectMeta, &o.Spec)
	case *networking.Sidecar:
		c.object(o.ObjectMeta, &o.Spec)
	case *security.PeerAuthentication:
		c.object(o.ObjectMeta, &o.Spec)
	case *security.AuthorizationPolicy:
		c.meta(o.ObjectMeta)
	case *security.RequestAuthentication:
		c.meta(o.ObjectMeta)
	default:
		return fmt.Errorf("unsupported object type %T", obj)
	}
	return errors.Join(c.errs...)
}

// object checks an Istio object: the metadata of the kinds istiod reads,
// and the spec of the kinds with field checks. Other kinds have none (the
// webhook has parsed them already).
func (c *checker) object(meta metav1.ObjectMeta, spec proto.Message) {
	switch s := spec.(type) {
	case *apinet.VirtualService:
		c.meta(meta)
		c.virtualService(s)
	case *apinet.DestinationRule:
		c.meta(meta)
		c.destinationRule(s)
	case *apinet.ServiceEntry:
		c.meta(meta)
		c.serviceEntry(s)
	case *apinet.WorkloadEntry:
		c.meta(meta)
		c.workloadEntry(s)
	case *apinet.Sidecar:
		c.meta(meta)
		c.sidecar(s)
	case *apisec.PeerAuthentication:
		c.meta(meta)
		c.peerAuthentication(s)
	}
}

func fieldOf(e error) string {
	var fe *FieldError
	if errors.As(e, &fe) {
		return fe.Field
	}
	return e.Error()
}
