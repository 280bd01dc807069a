// Package ndspb is the protoc-generated Go code of ../../nds.proto, kept as
// the reference the hand-written codec of package nds is tested against.
// Only tests may import it: it links the protobuf runtime, which package
// nds exists to keep out of pilot-agent. It registers
// istio.networking.nds.v1.NameTable in the global protobuf registry, as no
// production package does. Regenerate it with "go generate" in this
// directory (needs protoc and protoc-gen-go v1.36.12 on PATH).
package ndspb

//go:generate protoc --proto_path=../.. --go_out=. --go_opt=paths=source_relative nds.proto
