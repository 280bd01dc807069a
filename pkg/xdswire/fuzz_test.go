package xdswire_test

import (
	"bytes"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	security "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// seeds returns real encodings of every decoded message, by message name.
func seeds(t testing.TB) map[string][][]byte {
	s := map[string][][]byte{}
	for _, g := range discoveryRequests(t) {
		s["DiscoveryRequest"] = append(s["DiscoveryRequest"], marshal(t, g))
	}
	for _, g := range discoveryResponses() {
		s["DiscoveryResponse"] = append(s["DiscoveryResponse"], marshal(t, g))
	}
	for _, g := range deltaRequests(t) {
		s["DeltaDiscoveryRequest"] = append(s["DeltaDiscoveryRequest"], marshal(t, g))
	}
	for _, g := range deltaResponses() {
		s["DeltaDiscoveryResponse"] = append(s["DeltaDiscoveryResponse"], marshal(t, g))
	}
	s["IstioCertificateResponse"] = [][]byte{
		marshal(t, &security.IstioCertificateResponse{CertChain: []string{"leaf", "", "root"}}),
	}
	s["HealthCheckResponse"] = [][]byte{
		marshal(t, &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_NOT_SERVING}),
		marshal(t, &grpc_health_v1.HealthCheckResponse{Status: -1}),
	}
	return s
}

func addSeeds(f *testing.F, name string) {
	for _, b := range seeds(f)[name] {
		f.Add(b)
	}
	f.Add([]byte{})
}

// equateEmpty treats nil and empty slices and maps alike: Marshal does not
// keep an empty Any.Value apart from an absent one, nor need it.
var equateEmpty = cmpopts.EquateEmpty()

// checkStable checks that marshaling the decoded v and decoding again gives
// v back, and that marshaling that gives the same bytes.
func checkStable[T interface{ Marshal() []byte }](t *testing.T, v T, decode func([]byte) (T, error)) {
	b := v.Marshal()
	v2, err := decode(b)
	if err != nil {
		t.Fatalf("decode of Marshal output %x: %v", b, err)
	}
	if diff := cmp.Diff(v, v2, equateEmpty); diff != "" {
		t.Fatalf("decode(Marshal(v)) differs from v (-v +got):\n%s", diff)
	}
	if b2 := v2.Marshal(); !bytes.Equal(b, b2) {
		t.Fatalf("Marshal not stable:\n%x\n%x", b, b2)
	}
}

// The fuzz targets also compare with the generated code: where both decode
// the input, they must agree on every modeled field. (The generated code
// accepts a known field with the wrong wire type, as unknown, and rejects
// invalid UTF-8; this package does the opposite, so either may fail alone.)

func FuzzDecodeDiscoveryRequest(f *testing.F) {
	addSeeds(f, "DiscoveryRequest")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := xdswire.DecodeDiscoveryRequest(b)
		if err != nil {
			return
		}
		checkStable(t, r, xdswire.DecodeDiscoveryRequest)
		g := &discoveryv3.DiscoveryRequest{}
		if proto.Unmarshal(b, g) == nil {
			if got, want := genDiscoveryRequest(t, r), modeledDiscoveryRequest(g); !equalKnown(got, want) {
				t.Fatalf("decoded\n%v\ngenerated code decoded\n%v", got, want)
			}
		}
	})
}

func FuzzDecodeDiscoveryResponse(f *testing.F) {
	addSeeds(f, "DiscoveryResponse")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := xdswire.DecodeDiscoveryResponse(b)
		if err != nil {
			return
		}
		checkStable(t, r, xdswire.DecodeDiscoveryResponse)
		g := &discoveryv3.DiscoveryResponse{}
		if proto.Unmarshal(b, g) == nil {
			if got, want := genDiscoveryResponse(r), modeledDiscoveryResponse(g); !equalKnown(got, want) {
				t.Fatalf("decoded\n%v\ngenerated code decoded\n%v", got, want)
			}
		}
	})
}

func FuzzDecodeDeltaDiscoveryRequest(f *testing.F) {
	addSeeds(f, "DeltaDiscoveryRequest")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := xdswire.DecodeDeltaDiscoveryRequest(b)
		if err != nil {
			return
		}
		checkStable(t, r, xdswire.DecodeDeltaDiscoveryRequest)
		g := &discoveryv3.DeltaDiscoveryRequest{}
		if proto.Unmarshal(b, g) == nil {
			if got, want := genDeltaRequest(t, r), modeledDeltaRequest(g); !equalKnown(got, want) {
				t.Fatalf("decoded\n%v\ngenerated code decoded\n%v", got, want)
			}
		}
	})
}

func FuzzDecodeDeltaDiscoveryResponse(f *testing.F) {
	addSeeds(f, "DeltaDiscoveryResponse")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := xdswire.DecodeDeltaDiscoveryResponse(b)
		if err != nil {
			return
		}
		checkStable(t, r, xdswire.DecodeDeltaDiscoveryResponse)
		g := &discoveryv3.DeltaDiscoveryResponse{}
		if proto.Unmarshal(b, g) == nil {
			if got, want := genDeltaResponse(r), modeledDeltaResponse(g); !equalKnown(got, want) {
				t.Fatalf("decoded\n%v\ngenerated code decoded\n%v", got, want)
			}
		}
	})
}

func FuzzDecodeCertificateResponse(f *testing.F) {
	addSeeds(f, "IstioCertificateResponse")
	f.Fuzz(func(t *testing.T, b []byte) {
		chain, err := xdswire.DecodeCertificateResponse(b)
		g := &security.IstioCertificateResponse{}
		if err == nil && proto.Unmarshal(b, g) == nil {
			if diff := cmp.Diff(g.CertChain, chain, equateEmpty); diff != "" {
				t.Fatalf("cert chain differs from the generated code's (-generated +got):\n%s", diff)
			}
		}
	})
}

func FuzzDecodeHealthCheckResponse(f *testing.F) {
	addSeeds(f, "HealthCheckResponse")
	f.Fuzz(func(t *testing.T, b []byte) {
		status, err := xdswire.DecodeHealthCheckResponse(b)
		g := &grpc_health_v1.HealthCheckResponse{}
		if err == nil && proto.Unmarshal(b, g) == nil && status != int32(g.Status) {
			t.Fatalf("status %d, generated code %d", status, g.Status)
		}
	})
}

// FuzzStripFields checks StripFields and PrependField on any input: no
// panics, and for a well-formed message, no occurrence of the stripped field
// is left, the other fields are kept in order, and a prepended field is
// stripped again whole.
func FuzzStripFields(f *testing.F) {
	for _, b := range seeds(f)["DiscoveryRequest"] {
		f.Add(b, uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		num := protowire.Number(n%16 + 1)
		out := xdswire.StripFields(b, num)
		var kept []byte
		for rest := b; len(rest) > 0; {
			got, _, m := protowire.ConsumeField(rest)
			if m < 0 {
				return // malformed: only the absence of panics is checked
			}
			if got != num {
				kept = append(kept, rest[:m]...)
			}
			rest = rest[m:]
		}
		if !bytes.Equal(out, kept) {
			t.Fatalf("StripFields(%x, %d) = %x, want %x", b, num, out, kept)
		}
		if again := xdswire.StripFields(xdswire.PrependField(b, num, []byte("v")), num); !bytes.Equal(again, out) {
			t.Fatalf("prepended field not stripped: %x", again)
		}
		if _, found, err := xdswire.FieldString(out, num); found || err != nil {
			t.Fatalf("FieldString after StripFields: found %v, %v", found, err)
		}
	})
}
