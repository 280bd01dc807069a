// Package nds holds the NameTable that istiod pushes to sidecar agents
// (istio.networking.nds.v1.NameTable, declared in nds.proto) and that the
// DNS proxy answers mesh names from.
//
// The types are plain Go with the names protoc-gen-go gives them, and
// NameTable has a hand-written codec built only on protowire, so that the
// agent does not link the protobuf runtime for them. Marshal writes exactly
// the bytes of a deterministic proto.Marshal of the generated type, and
// Unmarshal reads what proto.Unmarshal does; the tests hold both to the
// generated code in internal/ndspb. Field numbers must not change.
package nds
