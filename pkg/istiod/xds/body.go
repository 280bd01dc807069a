package xds

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// bodies shares the encoded resources part of responses between streams: a
// push sends the same resources to every sidecar of a scope, and their
// responses differ only in the nonce (and version), which the codec writes
// around the shared body. A stream then hands gRPC three buffers, not one
// per resource, and nothing of the body is built again.
type bodies struct {
	mu    sync.Mutex
	m     map[bodyKey]*body
	bytes int
}

type bodyKey struct {
	typeURL string
	delta   bool
	hash    uint64
	n       int
}

type body struct {
	rs []*gen.Resource
	b  []byte
}

const (
	// minSharedBody is the fewest resources worth a shared body; smaller
	// responses are assembled per stream.
	minSharedBody = 8
	// maxBodyBytes bounds the cache; it starts over when full (a push
	// fills it again with what the current config needs).
	maxBodyBytes = 32 << 20
)

// get returns the encoded body of rs (DiscoveryResponse.resources entries
// for SotW, DeltaDiscoveryResponse.resources for delta), or nil when rs is
// too small to share.
func (bs *bodies) get(typeURL string, delta bool, rs []*gen.Resource) []byte {
	if len(rs) < minSharedBody {
		return nil
	}
	var h uint64 = 14695981039346656037
	for _, r := range rs {
		h = (h ^ r.Hash) * 1099511628211
	}
	k := bodyKey{typeURL: typeURL, delta: delta, hash: h, n: len(rs)}
	bs.mu.Lock()
	if b := bs.m[k]; b != nil && sameResources(b.rs, rs) {
		bs.mu.Unlock()
		return b.b
	}
	bs.mu.Unlock()
	var enc []byte
	if delta {
		enc = appendDeltaResources(nil, rs)
	} else {
		enc = appendSotwResources(nil, rs)
	}
	bs.mu.Lock()
	if bs.m == nil || bs.bytes+len(enc) > maxBodyBytes {
		bs.m, bs.bytes = map[bodyKey]*body{}, 0
	}
	bs.m[k] = &body{rs: rs, b: enc}
	bs.bytes += len(enc)
	bs.mu.Unlock()
	return enc
}

// sameResources compares two resource lists by name and content hash.
func sameResources(a, b []*gen.Resource) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) > 0 && &a[0] == &b[0] {
		return true // one list: generation shares them
	}
	for i := range a {
		if a[i] != b[i] && (a[i].Hash != b[i].Hash || a[i].Name != b[i].Name) {
			return false
		}
	}
	return true
}

func appendSotwResources(out []byte, rs []*gen.Resource) []byte {
	n := 0
	for _, r := range rs {
		n += len(r.ResponseEntry())
	}
	out = append(out[:len(out):len(out)], make([]byte, 0, n)...)
	for _, r := range rs {
		out = append(out, r.ResponseEntry()...)
	}
	return out
}

// appendDeltaResources appends the DeltaDiscoveryResponse.resources fields
// of rs: each a Resource with name (3), version (1) and the Any (2).
func appendDeltaResources(out []byte, rs []*gen.Resource) []byte {
	for _, r := range rs {
		anyBytes := r.AnyBytes()
		size := protowire.SizeTag(3) + protowire.SizeBytes(len(r.Name)) +
			protowire.SizeTag(1) + protowire.SizeBytes(len(r.Version)) +
			protowire.SizeTag(2) + protowire.SizeBytes(len(anyBytes))
		out = protowire.AppendTag(out, 2, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(size))
		out = protowire.AppendTag(out, 3, protowire.BytesType)
		out = protowire.AppendString(out, r.Name)
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendString(out, r.Version)
		out = protowire.AppendTag(out, 2, protowire.BytesType)
		out = protowire.AppendBytes(out, anyBytes)
	}
	return out
}
