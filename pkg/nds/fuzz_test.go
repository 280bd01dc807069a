package nds_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/nds/internal/ndspb"
)

// FuzzUnmarshal decodes arbitrary bytes with Unmarshal and with the
// generated code: both accept or both reject, and what they accept they
// read as the same table, which Marshal encodes as the generated code
// does. Seeds are real encodings, some with unknown fields, and the
// hand-written cases.
func FuzzUnmarshal(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 20 {
		pb := toPB(randomTable(r))
		if i%2 == 1 {
			pb.ProtoReflect().SetUnknown(unknownFields(r))
		}
		b, err := deterministic.Marshal(pb)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, tc := range wireCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got nds.NameTable
		err := got.Unmarshal(b)
		var pb ndspb.NameTable
		pbErr := proto.Unmarshal(b, &pb)
		if (err == nil) != (pbErr == nil) {
			t.Fatalf("Unmarshal: %v; the generated code: %v", err, pbErr)
		}
		if err != nil {
			return
		}
		// The generated code makes the map when it meets field 1 of any
		// wire type, so a skipped one leaves an empty map where Unmarshal
		// leaves nil: the same table.
		if diff := cmp.Diff(fromPB(&pb), &got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("(-generated +got):\n%s", diff)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("Validate of a decoded table: %v", err)
		}
		want, err := deterministic.Marshal(toPB(&got))
		if err != nil {
			t.Fatal(err)
		}
		if enc := got.Marshal(); !bytes.Equal(enc, want) {
			t.Fatalf("Marshal of the decoded table:\n got  %x\n want %x", enc, want)
		}
	})
}
