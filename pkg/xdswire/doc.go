// Package xdswire encodes and decodes, by hand, the few protobuf messages
// pilot-agent exchanges with Envoy, istiod and the Istio CA: the xDS
// discovery requests and responses (state of the world and delta), the
// Envoy Node, SDS secrets, the Istio certificate request and response, and
// the gRPC health check.
//
// It is built only on google.golang.org/protobuf/encoding/protowire, which
// links no message registry, so that the agent need not link grpc-go, the
// generated Envoy and Istio types, or the protobuf runtime. The tests check
// every message against those generated types.
//
// # Wire rules the decoders follow
//
// A message's fields may appear in any order, and a field may appear more
// than once: for a singular scalar field the last occurrence wins, an
// embedded message field that repeats is merged, and a repeated field's
// elements accumulate. Fields the decoders do not know are skipped.
// Unlike the protobuf runtime, which keeps a known field sent with the wrong
// wire type as an unknown field, the decoders here reject it with an error
// naming the message and the field. They never panic, whatever the input,
// and do not check that strings are valid UTF-8.
//
// Decoded strings are copies. Fields of type []byte (raw embedded messages
// such as [DiscoveryRequest.Node], and [Any.Value]) alias the input buffer,
// with their capacity clipped so that appending to them copies; the caller
// must not modify the input while it uses them.
package xdswire
