package xds

import (
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The fields of a DeltaDiscoveryRequest that grow with the resources a
// client holds: resource_names_subscribe and _unsubscribe (repeated
// string) and initial_resource_versions (map<string, string>, one
// length-delimited entry per key).
const (
	subscribeField   = 3
	unsubscribeField = 4
	versionsField    = 5
)

// decodeDelta decodes a delta request as protobuf's decoder does. The
// names and versions are read here, as substrings of one copy of the
// request, the versions into a map sized once: a sidecar that reconnects
// (every sidecar, when istiod restarts) brings a version for each resource
// it holds, thousands per stream, and protobuf's decoder makes a string of
// each name and version and grows the map as it goes, which was a third of
// istiod's CPU through a reconnect of 1000 sidecars (docs/benchmarks.md).
// The other fields go to protobuf's decoder, and so does the whole request
// when these are not plainly well formed, for its verdict.
func decodeDelta(b []byte) (*discoveryv3.DeltaDiscoveryRequest, error) {
	req := &discoveryv3.DeltaDiscoveryRequest{}
	rest, lists, ok := splitDelta(b)
	if !ok {
		rest = b
	}
	if err := proto.Unmarshal(rest, req); err != nil {
		return nil, status.Errorf(codes.Internal, "decode delta discovery request: %v", err)
	}
	if ok {
		req.ResourceNamesSubscribe = lists.subscribe
		req.ResourceNamesUnsubscribe = lists.unsubscribe
		req.InitialResourceVersions = lists.versions
	}
	return req, nil
}

// deltaLists are a delta request's names and versions.
type deltaLists struct {
	subscribe, unsubscribe []string
	versions               map[string]string
}

// splitDelta returns b without its names and versions, and them; false
// when b has none, or leaves them to protobuf's decoder: malformed wire
// data, a string that is not UTF-8.
func splitDelta(b []byte) (rest []byte, l deltaLists, ok bool) {
	var count [versionsField + 1]int
	size := 0
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, l, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil, l, false
		}
		if isList(num, typ) {
			count[num]++
			size += n + m
		}
		i += n + m
	}
	if size == 0 {
		return nil, l, false
	}
	if count[subscribeField] > 0 {
		l.subscribe = make([]string, 0, count[subscribeField])
	}
	if count[unsubscribeField] > 0 {
		l.unsubscribe = make([]string, 0, count[unsubscribeField])
	}
	if count[versionsField] > 0 {
		l.versions = make(map[string]string, count[versionsField])
	}
	s := string(b) // the one copy the names and versions share
	rest = make([]byte, 0, len(b)-size)
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		end := i + n + m
		if !isList(num, typ) {
			rest = append(rest, b[i:end]...)
			i = end
			continue
		}
		_, p := protowire.ConsumeVarint(b[i+n:]) // the length's bytes
		v := s[i+n+p : end]
		switch num {
		case subscribeField, unsubscribeField:
			if !utf8.ValidString(v) {
				return nil, l, false
			}
			if num == subscribeField {
				l.subscribe = append(l.subscribe, v)
			} else {
				l.unsubscribe = append(l.unsubscribe, v)
			}
		case versionsField:
			key, version, ok := mapEntry(b[i+n+p:end], v)
			if !ok {
				return nil, l, false
			}
			l.versions[key] = version // the last of a repeated key, as protobuf
		}
		i = end
	}
	return rest, l, true
}

func isList(num protowire.Number, typ protowire.Type) bool {
	return num >= subscribeField && num <= versionsField && typ == protowire.BytesType
}

// mapEntry reads a map<string, string> entry e: its key (field 1) and
// value (field 2), absent ones empty, as substrings of s, which holds e's
// bytes. Other fields, and these two with another wire type, are skipped,
// as protobuf's decoder skips them.
func mapEntry(e []byte, s string) (k, v string, ok bool) {
	for i := 0; i < len(e); {
		num, typ, n := protowire.ConsumeTag(e[i:])
		if n < 0 || num > protowire.MaxValidNumber {
			return "", "", false
		}
		m := protowire.ConsumeFieldValue(num, typ, e[i+n:])
		if m < 0 {
			return "", "", false
		}
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			_, p := protowire.ConsumeVarint(e[i+n:])
			str := s[i+n+p : i+n+m]
			if !utf8.ValidString(str) {
				return "", "", false
			}
			if num == 1 {
				k = str
			} else {
				v = str
			}
		}
		i += n + m
	}
	return k, v, true
}
