package duration

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
	apinet "istio.io/api/networking/v1alpha3"
)

// specs are the spec messages of the Istio kinds istiod reads.
var specs = map[string]protoreflect.MessageDescriptor{
	"VirtualService":  (&apinet.VirtualService{}).ProtoReflect().Descriptor(),
	"DestinationRule": (&apinet.DestinationRule{}).ProtoReflect().Descriptor(),
	"Sidecar":         (&apinet.Sidecar{}).ProtoReflect().Descriptor(),
	"ServiceEntry":    (&apinet.ServiceEntry{}).ProtoReflect().Descriptor(),
	"WorkloadEntry":   (&apinet.WorkloadEntry{}).ProtoReflect().Descriptor(),
}

// NormalizeSpec is NormalizeJSON for the spec of an Istio kind
// ("VirtualService"); kinds without a known spec are an error.
func NormalizeSpec(kind string, spec []byte) ([]byte, error) {
	md, ok := specs[kind]
	if !ok {
		return nil, fmt.Errorf("kind %q: no spec schema", kind)
	}
	return NormalizeJSON(md, spec)
}
