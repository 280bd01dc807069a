package gen

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type URLs istiod serves.
const (
	ClusterType   = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType  = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType  = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType     = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	NameTableType = "type.googleapis.com/istio.networking.nds.v1.NameTable"
)

// PushOrder returns the types in the order they are pushed: clusters
// before their endpoints, listeners before their routes.
func PushOrder() [5]string {
	return [...]string{ClusterType, EndpointType, ListenerType, RouteType, NameTableType}
}

// IsWildcard reports whether a type is subscribed to as a whole (CDS, LDS,
// NDS) rather than by name (EDS, RDS) for Envoy sidecars.
func IsWildcard(typeURL string) bool {
	return typeURL == ClusterType || typeURL == ListenerType || typeURL == NameTableType
}

// ShortName returns "CDS", "EDS", ... for a type URL.
func ShortName(typeURL string) string {
	switch typeURL {
	case ClusterType:
		return "CDS"
	case EndpointType:
		return "EDS"
	case ListenerType:
		return "LDS"
	case RouteType:
		return "RDS"
	case NameTableType:
		return "NDS"
	}
	return typeURL
}

// Resource is one generated resource, marshaled once and immutable.
type Resource struct {
	// Name is the resource name.
	Name string
	// Any holds the marshaled resource.
	Any *anypb.Any
	// Version is a hash of the content, used as the delta resource version.
	Version string
	// Hash is a hash of the name and content.
	Hash uint64
	// entry is the resource encoded as one element of a DiscoveryResponse's
	// resources field (field 2, an Any); Any.Value aliases its tail.
	entry []byte
	// err is set on a resource that could not be built: it holds only the
	// name, and Generate fails with err when it would return it.
	err *ResourceError
}

// ResourceError is a resource that could not be built. Generate returns it
// instead of a set missing the resource: a proxy must keep what it holds
// rather than get a set without it.
type ResourceError struct {
	// Name is the resource's name.
	Name string
	// Err is why it could not be built.
	Err error
}

func (e *ResourceError) Error() string { return fmt.Sprintf("build resource %q: %v", e.Name, e.Err) }

func (e *ResourceError) Unwrap() error { return e.Err }

// failed returns the first resource of rs that could not be built, as an
// error (nil: every resource is good).
func failed(rs []*Resource) error {
	for _, r := range rs {
		if r == nil {
			return &ResourceError{Err: errors.New("generator returned no resource")}
		}
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// ResponseEntry returns the resource encoded as one element of
// DiscoveryResponse.resources (tag, length and the Any), so responses can
// be assembled from shared bytes without marshaling again. Callers must
// not modify it.
func (r *Resource) ResponseEntry() []byte { return r.entry }

// AnyBytes returns the encoded Any (type_url and value) without the
// response field's tag and length, for embedding in other messages.
// Callers must not modify it.
func (r *Resource) AnyBytes() []byte {
	_, _, n := protowire.ConsumeTag(r.entry)
	_, m := protowire.ConsumeVarint(r.entry[n:])
	return r.entry[n+m:]
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// newResource marshals m (deterministically, so equal content has an equal
// version) straight into its entry. When m does not marshal it returns the
// error and also a resource holding it, never nil: a caller that drops the
// error still cannot drop the resource, and Generate fails on it.
func newResource(name string, m proto.Message) (*Resource, error) {
	typeURL := "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
	size := deterministic.Size(m)
	head := anyEntry(typeURL, size)
	entry, err := sized.MarshalAppend(head, m)
	if err == nil && len(entry) != cap(head) {
		err = fmt.Errorf("marshaled to %d bytes, sized %d", len(entry)-len(head), size)
	}
	if err != nil {
		r := failedResource(name, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err))
		return r, r.err
	}
	return entryResource(name, typeURL, entry, size), nil
}

// sized marshals as deterministic does, with the size a Size call just
// computed.
var sized = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}

// failedResource is a resource that could not be built, for err.
func failedResource(name string, err error) *Resource {
	return &Resource{Name: name, err: &ResourceError{Name: name, Err: err}}
}

// encodedResource wraps b, the encoding of a resource of typeURL, in an
// Any and hashes it.
func encodedResource(name, typeURL string, b []byte) *Resource {
	return entryResource(name, typeURL, append(anyEntry(typeURL, len(b)), b...), len(b))
}

// anyEntry starts the entry of a resource of typeURL whose encoding is size
// bytes: the DiscoveryResponse.resources field (2) holding an Any, up to
// the Any's value (type_url = 1, value = 2). Its capacity is the whole
// entry: append the encoding, then call entryResource.
func anyEntry(typeURL string, size int) []byte {
	anyLen := protowire.SizeTag(1) + protowire.SizeBytes(len(typeURL)) + protowire.SizeTag(2) + protowire.SizeBytes(size)
	entry := make([]byte, 0, protowire.SizeTag(2)+protowire.SizeBytes(anyLen))
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendVarint(entry, uint64(anyLen))
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, typeURL)
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	return protowire.AppendVarint(entry, uint64(size))
}

// entryResource is the resource name whose entry, begun by anyEntry, ends
// with its size-byte encoding; it hashes that encoding.
func entryResource(name, typeURL string, entry []byte, size int) *Resource {
	b := entry[len(entry)-size:]
	h := fnv.New64a()
	h.Write(b)
	sum := h.Sum64()
	h.Write([]byte(name))
	return &Resource{
		Name:    name,
		Any:     &anypb.Any{TypeUrl: typeURL, Value: b},
		Version: strconv.FormatUint(sum, 36),
		Hash:    h.Sum64(),
		entry:   entry,
	}
}

// mustAny packs m for an Any field of another resource. m fails to marshal
// only when a string is not valid UTF-8 (a name taken from bad
// configuration); then the Any's type URL is made invalid UTF-8 too, so
// that the resource embedding it fails to marshal and Generate reports
// that resource, rather than istiod panicking or sending it without m.
func mustAny(m proto.Message) *anypb.Any {
	typeURL := "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
	b, err := deterministic.Marshal(m)
	if err != nil {
		return &anypb.Any{TypeUrl: typeURL + "\xff"}
	}
	return &anypb.Any{TypeUrl: typeURL, Value: b}
}

// NewResourceForTest marshals m as a resource named name (for tests of
// code that sends resources).
func NewResourceForTest(name string, m proto.Message) (*Resource, error) { return newResource(name, m) }
