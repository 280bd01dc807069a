// Package nds holds the NameTable protobuf that istiod pushes to sidecar
// agents (istio.networking.nds.v1.NameTable) and that the DNS proxy answers
// mesh names from. The Go code is generated from nds.proto; regenerate it
// with "go generate ./pkg/nds" (needs protoc and protoc-gen-go v1.36.12 on
// PATH).
package nds

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative nds.proto
