package nds_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/nds/internal/ndspb"
)

var deterministic = proto.MarshalOptions{Deterministic: true}

// toPB copies t into the generated type, nil for nil.
func toPB(t *nds.NameTable) *ndspb.NameTable {
	if t == nil {
		return nil
	}
	out := &ndspb.NameTable{}
	if t.Table != nil {
		out.Table = make(map[string]*ndspb.NameTable_NameInfo, len(t.Table))
	}
	for k, ni := range t.Table {
		if ni == nil {
			out.Table[k] = nil
			continue
		}
		out.Table[k] = &ndspb.NameTable_NameInfo{Ips: ni.Ips, Registry: ni.Registry, Shortname: ni.Shortname,
			Namespace: ni.Namespace, AltHosts: ni.AltHosts}
	}
	return out
}

// fromPB copies the generated type into a NameTable (leaving out unknown
// fields), keeping nil maps and slices nil.
func fromPB(t *ndspb.NameTable) *nds.NameTable {
	out := &nds.NameTable{}
	if t.GetTable() != nil {
		out.Table = make(map[string]*nds.NameTable_NameInfo, len(t.GetTable()))
	}
	for k, ni := range t.GetTable() {
		if ni == nil {
			out.Table[k] = nil
			continue
		}
		out.Table[k] = &nds.NameTable_NameInfo{Ips: ni.GetIps(), Registry: ni.GetRegistry(), Shortname: ni.GetShortname(),
			Namespace: ni.GetNamespace(), AltHosts: ni.GetAltHosts()}
	}
	return out
}

// randomString returns "" a fifth of the time, otherwise a valid UTF-8
// string of 1 to 200 bytes (so lengths take one or two varint bytes).
func randomString(r *rand.Rand) string {
	const alphabet = "abcxyz.-09:"
	if r.IntN(5) == 0 {
		return ""
	}
	var sb strings.Builder
	n := 1 + r.IntN(12)
	if r.IntN(10) == 0 {
		n = 100 + r.IntN(100)
	}
	for range n {
		switch r.IntN(20) {
		case 0:
			sb.WriteString("é")
		case 1:
			sb.WriteString("名")
		case 2:
			sb.WriteRune(0x1F600)
		default:
			sb.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
	}
	return sb.String()
}

// randomStrings returns nil, an empty slice or up to 5 strings.
func randomStrings(r *rand.Rand) []string {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+r.IntN(5))
	for i := range out {
		out[i] = randomString(r)
	}
	return out
}

// randomTable returns a table of up to 40 hosts (a nil or empty map
// sometimes), with nil and empty NameInfos among them.
func randomTable(r *rand.Rand) *nds.NameTable {
	switch r.IntN(10) {
	case 0:
		return &nds.NameTable{}
	case 1:
		return &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}}
	}
	t := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}}
	for range 1 + r.IntN(40) {
		var ni *nds.NameTable_NameInfo
		switch r.IntN(15) {
		case 0:
		case 1:
			ni = &nds.NameTable_NameInfo{}
		default:
			ni = &nds.NameTable_NameInfo{Ips: randomStrings(r), Registry: randomString(r), Shortname: randomString(r),
				Namespace: randomString(r), AltHosts: randomStrings(r)}
		}
		t.Table[randomString(r)] = ni
	}
	return t
}

// normalized is what t reads back as: nil values as empty NameInfos, empty
// slices and maps as nil.
func normalized(t *nds.NameTable) *nds.NameTable {
	out := &nds.NameTable{}
	for k, ni := range t.GetTable() {
		if out.Table == nil {
			out.Table = map[string]*nds.NameTable_NameInfo{}
		}
		c := &nds.NameTable_NameInfo{Registry: ni.GetRegistry(), Shortname: ni.GetShortname(), Namespace: ni.GetNamespace()}
		if len(ni.GetIps()) > 0 {
			c.Ips = ni.GetIps()
		}
		if len(ni.GetAltHosts()) > 0 {
			c.AltHosts = ni.GetAltHosts()
		}
		out.Table[k] = c
	}
	return out
}

func TestMarshalIsTheGeneratedDeterministicEncoding(t *testing.T) {
	fixed := map[string]*nds.NameTable{
		"nil table":      nil,
		"empty":          {},
		"empty map":      {Table: map[string]*nds.NameTable_NameInfo{}},
		"nil value":      {Table: map[string]*nds.NameTable_NameInfo{"a": nil}},
		"empty value":    {Table: map[string]*nds.NameTable_NameInfo{"a": {}}},
		"empty key":      {Table: map[string]*nds.NameTable_NameInfo{"": {Ips: []string{"10.0.0.1"}}}},
		"empty elements": {Table: map[string]*nds.NameTable_NameInfo{"a": {Ips: []string{"", ""}, AltHosts: []string{""}}}},
		"long strings": {Table: map[string]*nds.NameTable_NameInfo{
			strings.Repeat("h", 300): {Registry: strings.Repeat("r", 20000), AltHosts: []string{strings.Repeat("a", 128)}}}},
		"key order is bytes": {Table: map[string]*nds.NameTable_NameInfo{"b": {}, "B": {}, "a.b": {}, "a": {}, "é": {}, "z": {}}},
	}
	for name, nt := range fixed {
		t.Run(name, func(t *testing.T) { checkMarshal(t, nt) })
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		nt := randomTable(r)
		t.Run(fmt.Sprintf("random %d", i), func(t *testing.T) { checkMarshal(t, nt) })
	}
}

func checkMarshal(t *testing.T, nt *nds.NameTable) {
	t.Helper()
	want, err := deterministic.Marshal(toPB(nt))
	if err != nil {
		t.Fatal(err)
	}
	if got := nt.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("Marshal:\n got  %x\n want %x", got, want)
	}
	if err := nt.Validate(); err != nil {
		t.Fatalf("Validate of a table the generated code marshals: %v", err)
	}
}

func TestUnmarshalReadsTheGeneratedEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		nt := randomTable(r)
		pb := toPB(nt)
		// Unknown fields of every wire type, in the table and in values,
		// which the generated code writes back after the known ones.
		if i%2 == 1 {
			pb.ProtoReflect().SetUnknown(unknownFields(r))
			for _, ni := range pb.GetTable() {
				if ni != nil {
					ni.ProtoReflect().SetUnknown(unknownFields(r))
				}
			}
		}
		for _, opts := range []proto.MarshalOptions{{}, deterministic} {
			b, err := opts.Marshal(pb)
			if err != nil {
				t.Fatal(err)
			}
			var got nds.NameTable
			if err := got.Unmarshal(b); err != nil {
				t.Fatalf("table %d: %v", i, err)
			}
			if diff := cmp.Diff(normalized(nt), &got); diff != "" {
				t.Fatalf("table %d (-want +got):\n%s", i, diff)
			}
		}
	}
}

// unknownFields returns an encoding of fields nds.proto does not declare
// (numbers 6 to 2^29-1), one of each wire type, including a group.
func unknownFields(r *rand.Rand) protoreflect.RawFields {
	num := func() protowire.Number { return protowire.Number(6 + r.IntN(int(protowire.MaxValidNumber)-6)) }
	var b []byte
	b = protowire.AppendTag(b, num(), protowire.VarintType)
	b = protowire.AppendVarint(b, r.Uint64())
	b = protowire.AppendTag(b, num(), protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, r.Uint32())
	b = protowire.AppendTag(b, num(), protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, r.Uint64())
	b = protowire.AppendTag(b, num(), protowire.BytesType)
	b = protowire.AppendString(b, "unknown \xff not checked as UTF-8")
	g := num()
	b = protowire.AppendTag(b, g, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, g, protowire.EndGroupType)
	return b
}

// Encoding helpers for hand-written inputs.
func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }

func str(num protowire.Number, s string) []byte {
	return protowire.AppendString(tag(num, protowire.BytesType), s)
}

func msg(num protowire.Number, parts ...[]byte) []byte {
	return protowire.AppendBytes(tag(num, protowire.BytesType), bytes.Join(parts, nil))
}

func varint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tag(num, protowire.VarintType), v)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// entry is a NameTable.table entry of key and value parts.
func entry(key string, value ...[]byte) []byte { return msg(1, str(1, key), msg(2, value...)) }

// wireCases are hand-written encodings: what each decodes to (nil: an
// error, whose text contains wantErr).
var wireCases = []struct {
	name    string
	in      []byte
	want    *nds.NameTable
	wantErr string
}{
	{name: "empty", in: nil, want: &nds.NameTable{}},
	{name: "one host", in: entry("a", str(1, "10.0.0.1"), str(2, "Kubernetes"), str(3, "a"), str(4, "ns"), str(5, "a.ns")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Ips: []string{"10.0.0.1"}, Registry: "Kubernetes",
			Shortname: "a", Namespace: "ns", AltHosts: []string{"a.ns"}}}}},
	{name: "fields out of order, last string wins, repeated appended",
		in:   entry("a", str(5, "x"), str(2, "r1"), str(1, "1"), str(2, "r2"), str(1, "2"), str(5, "y"), str(2, "")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Ips: []string{"1", "2"}, AltHosts: []string{"x", "y"}}}}},
	{name: "value before key", in: msg(1, msg(2, str(3, "s")), str(1, "k")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {Shortname: "s"}}}},
	{name: "entry without key", in: msg(1, msg(2, str(3, "s"))),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"": {Shortname: "s"}}}},
	{name: "entry without value", in: msg(1, str(1, "k")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "empty entry", in: msg(1),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"": {}}}},
	{name: "duplicate key: last entry wins", in: cat(entry("k", str(1, "1"), str(2, "R")), entry("k", str(1, "2"))),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {Ips: []string{"2"}}}}},
	{name: "key twice in an entry: last wins", in: msg(1, str(1, "a"), msg(2, str(3, "s")), str(1, "b")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"b": {Shortname: "s"}}}},
	{name: "value twice in an entry: merged", in: msg(1, str(1, "k"), msg(2, str(1, "1"), str(2, "R")), msg(2, str(1, "2"), str(3, "s"))),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {Ips: []string{"1", "2"}, Registry: "R", Shortname: "s"}}}},
	{name: "unknown fields everywhere",
		in:   cat(varint(9, 1), msg(1, varint(3, 5), str(1, "k"), str(7, "\xff"), msg(2, varint(6, 1), str(2, "R"), str(99, "x"))), str(1000, "y")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {Registry: "R"}}}},
	{name: "wrong wire type of table is skipped", in: cat(varint(1, 3), entry("k")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "wrong wire type of key and value is skipped", in: msg(1, varint(1, 3), str(1, "k"), protowire.AppendFixed32(tag(2, protowire.Fixed32Type), 1)),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "wrong wire type of a NameInfo field is skipped", in: entry("k", varint(2, 1), protowire.AppendFixed64(tag(1, protowire.Fixed64Type), 1)),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "group of a known field number is skipped",
		in:   cat(tag(1, protowire.StartGroupType), varint(2, 1), tag(1, protowire.EndGroupType), entry("k")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "largest field number", in: cat(varint(protowire.MaxValidNumber, 1), entry("k")),
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},
	{name: "padded varints", in: []byte{0x8a, 0x00, 0x83, 0x80, 0x00, 0x0a, 0x01, 'k'}, // tag and lengths in more bytes than needed
		want: &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"k": {}}}},

	{name: "truncated tag", in: []byte{0x8a}, wantErr: "NameTable: field tag"},
	{name: "truncated table length", in: []byte{0x0a}, wantErr: "NameTable.table: unexpected EOF"},
	{name: "truncated entry", in: entry("k")[:4], wantErr: "NameTable.table: unexpected EOF"},
	{name: "truncated key", in: msg(1, str(1, "key")[:3]), wantErr: "NameTable.table.key: unexpected EOF"},
	{name: "truncated value", in: msg(1, msg(2, str(1, "ip"))[:3]), wantErr: "NameTable.table.value: unexpected EOF"},
	{name: "truncated ips", in: entry("k", str(1, "10.0.0.1")[:4]), wantErr: "NameTable.table.value.ips: unexpected EOF"},
	{name: "truncated registry", in: entry("k", str(2, "R")[:1]), wantErr: "NameTable.table.value.registry: unexpected EOF"},
	{name: "truncated unknown varint", in: []byte{0x48, 0x80}, wantErr: "NameTable field 9 (wire type 0): unexpected EOF"},
	{name: "truncated unknown fixed64", in: []byte{0x49, 1, 2}, wantErr: "NameTable field 9 (wire type 1): unexpected EOF"},
	{name: "truncated varint of the table field", in: []byte{0x08}, wantErr: "NameTable.table (wire type 0): unexpected EOF"},
	{name: "varint overflow", in: append([]byte{0x08}, bytes.Repeat([]byte{0xff}, 10)...), wantErr: "overflow"},
	// protowire's errors begin "proto:" with a space or a no-break space.
	{name: "field number 0", in: varint(0, 1), wantErr: "invalid field number"},
	{name: "field number too large", in: protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1),
		wantErr: "NameTable: field number 536870912 out of range"},
	{name: "field number too large in an entry", in: msg(1, protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1)),
		wantErr: "NameTable.table: field number 536870912 out of range"},
	{name: "unmatched end group", in: tag(5, protowire.EndGroupType), wantErr: "NameTable field 5 (wire type 4)"},
	{name: "end group in an entry", in: msg(1, tag(1, protowire.EndGroupType)), wantErr: "NameTable.table.key (wire type 4)"},
	{name: "end group in a value", in: entry("k", tag(3, protowire.EndGroupType)), wantErr: "NameTable.table.value.shortname (wire type 4)"},
	{name: "group not ended", in: tag(7, protowire.StartGroupType), wantErr: "NameTable field 7 (wire type 3)"},
	{name: "group ended by another number", in: cat(tag(7, protowire.StartGroupType), tag(8, protowire.EndGroupType)), wantErr: "NameTable field 7"},
	{name: "reserved wire type", in: tag(1, 6), wantErr: "NameTable.table (wire type 6)"},
	{name: "invalid UTF-8 key", in: entry("k\xff"), wantErr: "NameTable.table key: invalid UTF-8"},
	{name: "invalid UTF-8 ips", in: entry("k", str(1, "\xc3")), wantErr: "NameTable.table.value.ips: invalid UTF-8"},
	{name: "invalid UTF-8 registry", in: entry("k", str(2, "\xed\xa0\x80")), wantErr: "NameTable.table.value.registry: invalid UTF-8"},
	{name: "invalid UTF-8 shortname", in: entry("k", str(3, "\xff")), wantErr: "NameTable.table.value.shortname: invalid UTF-8"},
	{name: "invalid UTF-8 namespace", in: entry("k", str(4, "\xff")), wantErr: "NameTable.table.value.namespace: invalid UTF-8"},
	{name: "invalid UTF-8 alt_hosts", in: entry("k", str(5, "\xff")), wantErr: "NameTable.table.value.alt_hosts: invalid UTF-8"},
}

// TestUnmarshalHandWritten checks each hand-written encoding against what
// it should decode to and against the generated code, which must agree.
func TestUnmarshalHandWritten(t *testing.T) {
	for _, tc := range wireCases {
		t.Run(tc.name, func(t *testing.T) {
			got := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"stale": {}}}
			err := got.Unmarshal(tc.in)
			var pb ndspb.NameTable
			pbErr := proto.Unmarshal(tc.in, &pb)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Unmarshal: %v, want an error containing %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(&nds.NameTable{}, got); diff != "" {
					t.Errorf("table after an error (-want +got):\n%s", diff)
				}
				if pbErr == nil {
					t.Fatalf("the generated code accepts it: %v", &pb)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if pbErr != nil {
				t.Fatalf("the generated code rejects it: %v", pbErr)
			}
			if diff := cmp.Diff(fromPB(&pb), got); diff != "" {
				t.Errorf("differs from the generated code's (-generated +got):\n%s", diff)
			}
		})
	}
}

func TestUnmarshalNil(t *testing.T) {
	var nt *nds.NameTable
	if err := nt.Unmarshal(nil); err == nil {
		t.Fatal("Unmarshal into a nil table succeeded")
	}
}

// TestValidate checks that Validate fails exactly when the generated code
// fails to marshal, naming the field.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		nt   *nds.NameTable
		want string
	}{
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a\xff": {}}}, `NameTable.table key "a\xff": invalid UTF-8`},
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Ips: []string{"1", "\xff"}}}}, `NameTable.table["a"].ips "\xff": invalid UTF-8`},
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Registry: "\xff"}}}, `NameTable.table["a"].registry`},
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Shortname: "\xff"}}}, `NameTable.table["a"].shortname`},
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {Namespace: "\xff"}}}, `NameTable.table["a"].namespace`},
		{&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"a": {AltHosts: []string{"\xff"}}, "b": nil}}, `NameTable.table["a"].alt_hosts`},
	} {
		err := tc.nt.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want an error containing %s", err, tc.want)
		}
		if _, err := deterministic.Marshal(toPB(tc.nt)); err == nil {
			t.Errorf("the generated code marshals %v", tc.nt)
		}
		// Marshal writes it anyway; Unmarshal and the generated code refuse it.
		var back nds.NameTable
		if err := back.Unmarshal(tc.nt.Marshal()); err == nil {
			t.Errorf("Unmarshal accepted invalid UTF-8 of %v", tc.nt)
		}
	}
	var nilTable *nds.NameTable
	if err := nilTable.Validate(); err != nil {
		t.Errorf("Validate of nil: %v", err)
	}
}

// TestJSON checks that encoding/json writes what protojson with
// UseProtoNames writes for the generated type, and reads it back.
func TestJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 200 {
		nt := normalized(randomTable(r)) // nil values: protojson writes {}, encoding/json null
		got, err := json.Marshal(nt)
		if err != nil {
			t.Fatal(err)
		}
		want, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(toPB(nt))
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantV, gotV); diff != "" {
			t.Fatalf("table %d: JSON (-protojson +encoding/json):\n%s", i, diff)
		}
		var back nds.NameTable
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(nt, &back); diff != "" {
			t.Fatalf("table %d: read back from protojson's (-want +got):\n%s", i, diff)
		}
	}
	b, err := json.Marshal(&nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"h": {AltHosts: []string{"x"}}}})
	if err != nil || string(b) != `{"table":{"h":{"alt_hosts":["x"]}}}` {
		t.Errorf("json.Marshal: %s, %v", b, err)
	}
}

func TestGetters(t *testing.T) {
	var nt *nds.NameTable
	var ni *nds.NameTable_NameInfo
	if nt.GetTable() != nil || ni.GetIps() != nil || ni.GetRegistry() != "" || ni.GetShortname() != "" ||
		ni.GetNamespace() != "" || ni.GetAltHosts() != nil {
		t.Error("getters of nil are not zero")
	}
	ni = &nds.NameTable_NameInfo{Ips: []string{"1"}, Registry: "r", Shortname: "s", Namespace: "n", AltHosts: []string{"a"}}
	nt = &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{"h": ni}}
	if nt.GetTable()["h"] != ni || ni.GetIps()[0] != "1" || ni.GetRegistry() != "r" || ni.GetShortname() != "s" ||
		ni.GetNamespace() != "n" || ni.GetAltHosts()[0] != "a" {
		t.Error("getters do not return the fields")
	}
}

// TestReference checks the generated reference: its type URL is TypeURL,
// and its descriptor, with go_package moved to internal/ndspb, registers.
func TestReference(t *testing.T) {
	d := (&ndspb.NameTable{}).ProtoReflect().Descriptor()
	if got := "type.googleapis.com/" + string(d.FullName()); got != nds.TypeURL {
		t.Errorf("TypeURL %s, the generated type's %s", nds.TypeURL, got)
	}
	if got := d.ParentFile().Options().(*descriptorpb.FileOptions).GetGoPackage(); got != "github.com/skiff-mesh/skiff/pkg/nds/internal/ndspb" {
		t.Errorf("go_package %q", got)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil || mt.Descriptor() != d {
		t.Errorf("registry: %v, %v", mt, err)
	}
}
