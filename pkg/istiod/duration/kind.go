package duration

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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

// Unmarshal is protojson.Unmarshal of b into m after NormalizeJSON: a
// drop-in for reading Istio specs that takes every duration spelling Istio
// takes. An invalid duration is an *Error naming the field and the value.
func Unmarshal(b []byte, m proto.Message) error {
	nb, err := NormalizeJSON(m.ProtoReflect().Descriptor(), b)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(nb, m)
}
