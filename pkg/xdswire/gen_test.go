package xdswire_test

// Conversions between this package's types and the generated ones, so that
// every comparison is proto.Equal on the generated types, field by field.

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// marshal encodes m deterministically.
func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %T: %v", m, err)
	}
	return b
}

// genNode decodes the raw Node b with the generated type; nil stays nil.
func genNode(t testing.TB, b []byte) *corev3.Node {
	t.Helper()
	if b == nil {
		return nil
	}
	n := &corev3.Node{}
	if err := proto.Unmarshal(b, n); err != nil {
		t.Fatalf("unmarshal Node: %v", err)
	}
	return n
}

func genStatus(s *xdswire.Status) *status.Status {
	if s == nil {
		return nil
	}
	return &status.Status{Code: s.Code, Message: s.Message}
}

func genAny(a *xdswire.Any) *anypb.Any {
	if a == nil {
		return nil
	}
	return &anypb.Any{TypeUrl: a.TypeURL, Value: a.Value}
}

func genDiscoveryRequest(t testing.TB, r *xdswire.DiscoveryRequest) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		VersionInfo:   r.VersionInfo,
		Node:          genNode(t, r.Node),
		ResourceNames: r.ResourceNames,
		TypeUrl:       r.TypeURL,
		ResponseNonce: r.ResponseNonce,
		ErrorDetail:   genStatus(r.ErrorDetail),
	}
}

func genDiscoveryResponse(r *xdswire.DiscoveryResponse) *discoveryv3.DiscoveryResponse {
	g := &discoveryv3.DiscoveryResponse{VersionInfo: r.VersionInfo, TypeUrl: r.TypeURL, Nonce: r.Nonce}
	for i := range r.Resources {
		g.Resources = append(g.Resources, genAny(&r.Resources[i]))
	}
	return g
}

func genDeltaRequest(t testing.TB, r *xdswire.DeltaDiscoveryRequest) *discoveryv3.DeltaDiscoveryRequest {
	return &discoveryv3.DeltaDiscoveryRequest{
		Node:                     genNode(t, r.Node),
		TypeUrl:                  r.TypeURL,
		ResourceNamesSubscribe:   r.Subscribe,
		ResourceNamesUnsubscribe: r.Unsubscribe,
		InitialResourceVersions:  r.InitialResourceVersions,
		ResponseNonce:            r.ResponseNonce,
		ErrorDetail:              genStatus(r.ErrorDetail),
	}
}

func genDeltaResponse(r *xdswire.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryResponse {
	g := &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: r.SystemVersionInfo,
		TypeUrl:           r.TypeURL,
		RemovedResources:  r.RemovedResources,
		Nonce:             r.Nonce,
	}
	for _, res := range r.Resources {
		g.Resources = append(g.Resources, &discoveryv3.Resource{
			Name: res.Name, Version: res.Version, Resource: genAny(res.Resource),
		})
	}
	return g
}

// The generated messages with the fields this package does not model
// cleared: what a decode then Marshal can keep.

func modeledDiscoveryRequest(g *discoveryv3.DiscoveryRequest) *discoveryv3.DiscoveryRequest {
	g = proto.Clone(g).(*discoveryv3.DiscoveryRequest)
	g.ResourceLocators = nil
	clearDetails(g.ErrorDetail)
	return g
}

func modeledDiscoveryResponse(g *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryResponse {
	g = proto.Clone(g).(*discoveryv3.DiscoveryResponse)
	g.Canary, g.ControlPlane, g.ResourceErrors = false, nil, nil
	return g
}

func modeledDeltaRequest(g *discoveryv3.DeltaDiscoveryRequest) *discoveryv3.DeltaDiscoveryRequest {
	g = proto.Clone(g).(*discoveryv3.DeltaDiscoveryRequest)
	g.ResourceLocatorsSubscribe, g.ResourceLocatorsUnsubscribe = nil, nil
	clearDetails(g.ErrorDetail)
	return g
}

func modeledDeltaResponse(g *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryResponse {
	g = proto.Clone(g).(*discoveryv3.DeltaDiscoveryResponse)
	g.RemovedResourceNames, g.ControlPlane, g.ResourceErrors = nil, nil, nil
	for _, r := range g.Resources {
		r.Aliases, r.ResourceName, r.Ttl, r.CacheControl, r.Metadata = nil, nil, nil, nil, nil
	}
	return g
}

func clearDetails(s *status.Status) {
	if s != nil {
		s.Details = nil
	}
}

// equalKnown reports whether got and want are equal once the unknown fields
// of both, at every depth, are dropped: this package skips unknown fields,
// and the generated code keeps as unknown a known field with the wrong wire
// type.
func equalKnown(got, want proto.Message) bool {
	got, want = proto.Clone(got), proto.Clone(want)
	dropUnknown(got.ProtoReflect())
	dropUnknown(want.ProtoReflect())
	return proto.Equal(got, want)
}

func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
					dropUnknown(v.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					dropUnknown(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			dropUnknown(v.Message())
		}
		return true
	})
}
