package xds

import (
	"fmt"
	"hash/maphash"
	"sync"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec delegated to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/bufpool"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// Codec is the codec a server of the ADS service (Register) needs: it
// assembles responses from shared, pre-encoded resources and reads
// requests lazily, into pooled buffers (requestBuffers).
func Codec() encoding.CodecV2 { return codec{} }

// codec handles the ADS state-of-the-world messages itself and delegates
// every other message to the standard proto codec.
type codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

// requestBuffers holds the copies of SotW requests: the ACK of a sidecar
// subscribed to 1000 clusters (about 50 KiB of names) takes a 64 KiB
// buffer, where gRPC's default pool took a 1 MiB one and cleared it.
var requestBuffers bufpool.Tiered

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case *sotwResponse:
		return r.encode(), nil
	case *deltaResponse:
		return r.encode(), nil
	}
	return protoCodec.Marshal(v)
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	// The ADS streams' requests are kept encoded here, in a pooled copy:
	// they are decoded aside (see aside), with their handling.
	switch r := v.(type) {
	case *rawRequest:
		r.buf = data.MaterializeToBuffer(&requestBuffers)
		return nil
	case *rawDelta:
		r.buf = data.MaterializeToBuffer(&requestBuffers)
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}

// rawDelta is a DeltaDiscoveryRequest as received, decoded with its
// handling.
type rawDelta struct{ buf mem.Buffer }

// decode decodes the request and releases its buffer.
func (r *rawDelta) decode() (*discoveryv3.DeltaDiscoveryRequest, error) {
	defer r.buf.Free()
	return decodeDelta(r.buf.ReadOnlyData())
}

// aside runs f on a goroutine of its own and returns its error. A stream's
// handler goroutine runs each request aside, from its decoding on: the
// protobuf decoder's frames (deeper for a request that carries a node, a
// Struct in a Value in a Struct), the parsing of a node's metadata into the
// proxy, and the handling (the configuration a proxy with labels is given
// includes its inbound listeners, whose encoding recurses deeply). Run on
// the handler, any of them grows its stack, which the runtime then keeps
// for the stream's life: parked in RecvMsg, the handler uses more than a
// quarter of it (docs/benchmarks.md, istiod xDS; pkg/istiod's
// authenticateAside does the same for the certificate check).
func aside(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return <-done
}

// sotwResponse is a DiscoveryResponse whose resources are shared,
// pre-encoded entries: sending it copies no resource bytes.
type sotwResponse struct {
	version, typeURL, nonce string
	resources               []*gen.Resource
	// body, when set, is resources already encoded (shared by streams).
	body []byte
}

func (r *sotwResponse) encode() mem.BufferSlice {
	head := protowire.AppendTag(nil, 1, protowire.BytesType) // version_info
	head = protowire.AppendString(head, r.version)
	tail := protowire.AppendTag(nil, 4, protowire.BytesType) // type_url
	tail = protowire.AppendString(tail, r.typeURL)
	tail = protowire.AppendTag(tail, 5, protowire.BytesType) // nonce
	tail = protowire.AppendString(tail, r.nonce)
	if r.body != nil {
		return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(r.body), mem.SliceBuffer(tail)}
	}
	out := make(mem.BufferSlice, 0, len(r.resources)+2)
	out = append(out, mem.SliceBuffer(head))
	for _, res := range r.resources {
		out = append(out, mem.SliceBuffer(res.ResponseEntry()))
	}
	return append(out, mem.SliceBuffer(tail))
}

// deltaResponse is a DeltaDiscoveryResponse whose resources' Any bytes are
// shared, pre-encoded: only each Resource's small envelope is written.
type deltaResponse struct {
	systemVersion, typeURL, nonce string
	resources                     []*gen.Resource
	removed                       []string
	// body, when set, is resources already encoded (shared by streams).
	body []byte
}

func (r *deltaResponse) encode() mem.BufferSlice {
	out := make(mem.BufferSlice, 0, 2*len(r.resources)+2)
	head := protowire.AppendTag(nil, 1, protowire.BytesType) // system_version_info
	head = protowire.AppendString(head, r.systemVersion)
	out = append(out, mem.SliceBuffer(head))
	if r.body != nil {
		return append(out, mem.SliceBuffer(r.body), mem.SliceBuffer(r.appendTail(nil)))
	}
	// One buffer for all envelopes, each followed by the shared Any bytes.
	env := make([]byte, 0, len(r.resources)*(len(r.typeURL)/2+64))
	starts := make([]int, 0, len(r.resources)+1)
	for _, res := range r.resources {
		anyBytes := res.AnyBytes()
		// Resource: name = 3, version = 1, resource = 2 (Any).
		size := protowire.SizeTag(3) + protowire.SizeBytes(len(res.Name)) +
			protowire.SizeTag(1) + protowire.SizeBytes(len(res.Version)) +
			protowire.SizeTag(2) + protowire.SizeBytes(len(anyBytes))
		starts = append(starts, len(env))
		env = protowire.AppendTag(env, 2, protowire.BytesType) // resources
		env = protowire.AppendVarint(env, uint64(size))
		env = protowire.AppendTag(env, 3, protowire.BytesType)
		env = protowire.AppendString(env, res.Name)
		env = protowire.AppendTag(env, 1, protowire.BytesType)
		env = protowire.AppendString(env, res.Version)
		env = protowire.AppendTag(env, 2, protowire.BytesType)
		env = protowire.AppendVarint(env, uint64(len(anyBytes)))
	}
	starts = append(starts, len(env))
	for i, res := range r.resources {
		out = append(out, mem.SliceBuffer(env[starts[i]:starts[i+1]]), mem.SliceBuffer(res.AnyBytes()))
	}
	return append(out, mem.SliceBuffer(r.appendTail(nil)))
}

// appendTail appends the fields after the resources: type_url, nonce and
// removed_resources.
func (r *deltaResponse) appendTail(tail []byte) []byte {
	tail = protowire.AppendTag(tail, 4, protowire.BytesType) // type_url
	tail = protowire.AppendString(tail, r.typeURL)
	tail = protowire.AppendTag(tail, 5, protowire.BytesType) // nonce
	tail = protowire.AppendString(tail, r.nonce)
	for _, n := range r.removed {
		tail = protowire.AppendTag(tail, 6, protowire.BytesType) // removed_resources
		tail = protowire.AppendString(tail, n)
	}
	return tail
}

// rawRequest is a DiscoveryRequest whose resource names stay encoded, with
// a hash: the ACKs of a SotW client repeat every name, and most of them
// only need to be compared with the previous request.
type rawRequest struct {
	// req has every field but resource_names.
	req discoveryv3.DiscoveryRequest
	// names holds the encoded resource_names fields; it may point into buf.
	names     []byte
	namesHash uint64
	hasNames  bool
	buf       mem.Buffer
}

// free releases the request's buffer; names must not be read after it.
func (r *rawRequest) free() {
	if r.buf != nil {
		r.buf.Free()
		r.buf, r.names = nil, nil
	}
}

var namesSeed = maphash.MakeSeed()

func (r *rawRequest) decode(b []byte) error {
	rest := make([]byte, 0, 256)
	start := -1
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return fmt.Errorf("decode discovery request: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return fmt.Errorf("decode discovery request: %w", protowire.ParseError(m))
		}
		if num == 3 && typ == protowire.BytesType {
			// The names follow each other (a thousand in a sidecar's EDS
			// ACK): skip the run with the one-byte tag alone.
			end := skipNames(b, i+n+m)
			// Names are usually contiguous; copy them out otherwise.
			if start < 0 {
				start = i
				r.names = b[i:end]
			} else if &r.names[len(r.names)-1] == &b[i-1] {
				r.names = b[start:end]
			} else {
				r.names = append(r.names[:len(r.names):len(r.names)], b[i:end]...)
			}
			r.hasNames = true
			i = end
			continue
		}
		rest = append(rest, b[i:i+n+m]...)
		i += n + m
	}
	// As protobuf's decoder: a string field holds valid UTF-8.
	for nb := r.names; len(nb) > 0; {
		_, _, n := protowire.ConsumeTag(nb)
		v, m := protowire.ConsumeBytes(nb[n:])
		if !utf8.Valid(v) {
			return fmt.Errorf("decode discovery request: resource name %q is not valid UTF-8", v)
		}
		nb = nb[n+m:]
	}
	r.namesHash = maphash.Bytes(namesSeed, r.names)
	if err := proto.Unmarshal(rest, &r.req); err != nil {
		return fmt.Errorf("decode discovery request: %w", err)
	}
	return nil
}

// namesTag is the tag byte of resource_names (field 3, length-delimited).
const namesTag = 3<<3 | byte(protowire.BytesType)

// skipNames returns the end of the run of resource_names fields starting at
// i (i itself when none starts there).
func skipNames(b []byte, i int) int {
	for i < len(b) && b[i] == namesTag {
		l, n := protowire.ConsumeVarint(b[i+1:])
		if n < 0 || l > uint64(len(b)-i-1-n) {
			return i // malformed: the general loop reports it
		}
		i += 1 + n + int(l)
	}
	return i
}

// Names decodes the resource names, interning them in in.
func (r *rawRequest) Names(in *interner) []string {
	var out []string
	for b := r.names; len(b) > 0; {
		_, _, n := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[n:])
		out = append(out, in.intern(v))
		b = b[n+m:]
	}
	return out
}

// interner shares name strings between connections: a thousand sidecars
// subscribe to the same thousand clusters.
type interner struct {
	mu sync.RWMutex
	m  map[string]string
}

// maxInterned bounds the table; it starts over when full.
const maxInterned = 1 << 20

func (in *interner) intern(b []byte) string {
	in.mu.RLock()
	s, ok := in.m[string(b)]
	in.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	in.mu.Lock()
	if in.m == nil || len(in.m) >= maxInterned {
		in.m = map[string]string{}
	}
	in.m[s] = s
	in.mu.Unlock()
	return s
}

// internString is intern for a name that may be a substring of a larger
// string (a request's copy, decodeDelta), which the table must not keep:
// a name not seen yet is copied out.
func (in *interner) internString(n string) string {
	in.mu.RLock()
	s, ok := in.m[n]
	in.mu.RUnlock()
	if ok {
		return s
	}
	return in.intern([]byte(n))
}

// adsHandler is what the hand-written service descriptor dispatches to.
type adsHandler interface {
	streamSotW(grpc.ServerStream) error
	streamDelta(grpc.ServerStream) error
}

// adsService is envoy.service.discovery.v3.AggregatedDiscoveryService,
// registered by hand so the SotW stream can use the codec's types.
var adsService = grpc.ServiceDesc{
	ServiceName: "envoy.service.discovery.v3.AggregatedDiscoveryService",
	HandlerType: (*adsHandler)(nil),
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "StreamAggregatedResources",
			Handler:       func(srv any, s grpc.ServerStream) error { return srv.(adsHandler).streamSotW(s) },
			ServerStreams: true, ClientStreams: true,
		},
		{
			StreamName:    "DeltaAggregatedResources",
			Handler:       func(srv any, s grpc.ServerStream) error { return srv.(adsHandler).streamDelta(s) },
			ServerStreams: true, ClientStreams: true,
		},
	},
	Metadata: "envoy/service/discovery/v3/ads.proto",
}
