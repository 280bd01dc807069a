package nds

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// TypeURL is the xDS type URL of a NameTable resource.
const TypeURL = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// Field numbers of nds.proto.
const (
	fieldTable = 1 // NameTable.table, a map<string, NameInfo>

	fieldEntryKey   = 1 // a map entry's key
	fieldEntryValue = 2 // a map entry's value

	fieldIps       = 1
	fieldRegistry  = 2
	fieldShortname = 3
	fieldNamespace = 4
	fieldAltHosts  = 5
)

// errInvalidUTF8 is the error of a string field that is not valid UTF-8,
// which proto3 forbids.
var errInvalidUTF8 = errors.New("invalid UTF-8")

// Marshal returns the protobuf encoding of t: map entries in key order,
// fields in field-number order, every entry with its key and value, the
// bytes proto.MarshalOptions{Deterministic: true} writes for the generated
// type. Equal tables have equal encodings. A nil value in Table is encoded
// as an empty NameInfo. Marshal does not check that strings are valid
// UTF-8, as the generated code does; Validate does.
func (t *NameTable) Marshal() []byte {
	keys := slices.Sorted(maps.Keys(t.GetTable()))
	infoSizes := make([]int, len(keys))
	size := 0
	for i, k := range keys {
		infoSizes[i] = t.Table[k].size()
		size += protowire.SizeTag(fieldTable) + protowire.SizeBytes(entrySize(k, infoSizes[i]))
	}
	b := make([]byte, 0, size)
	for i, k := range keys {
		b = protowire.AppendTag(b, fieldTable, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(entrySize(k, infoSizes[i])))
		b = protowire.AppendTag(b, fieldEntryKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, fieldEntryValue, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(infoSizes[i]))
		b = t.Table[k].append(b)
	}
	return b
}

// entrySize is the encoded size of a map entry of key and a NameInfo of
// infoSize bytes.
func entrySize(key string, infoSize int) int {
	return protowire.SizeTag(fieldEntryKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldEntryValue) + protowire.SizeBytes(infoSize)
}

// size is the encoded size of ni (0 for nil).
func (ni *NameTable_NameInfo) size() int {
	n := repeatedSize(fieldIps, ni.GetIps())
	n += stringSize(fieldRegistry, ni.GetRegistry())
	n += stringSize(fieldShortname, ni.GetShortname())
	n += stringSize(fieldNamespace, ni.GetNamespace())
	return n + repeatedSize(fieldAltHosts, ni.GetAltHosts())
}

// append appends the encoding of ni (nothing for nil) to b.
func (ni *NameTable_NameInfo) append(b []byte) []byte {
	b = appendRepeated(b, fieldIps, ni.GetIps())
	b = appendString(b, fieldRegistry, ni.GetRegistry())
	b = appendString(b, fieldShortname, ni.GetShortname())
	b = appendString(b, fieldNamespace, ni.GetNamespace())
	return appendRepeated(b, fieldAltHosts, ni.GetAltHosts())
}

// stringSize is the encoded size of a proto3 string field: nothing when
// empty.
func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// repeatedSize is the encoded size of a repeated string field: every
// element, empty or not.
func repeatedSize(num protowire.Number, ss []string) int {
	n := 0
	for _, s := range ss {
		n += protowire.SizeTag(num) + protowire.SizeBytes(len(s))
	}
	return n
}

func appendRepeated(b []byte, num protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

// Validate reports the first string of t, in Marshal's order, that is not
// valid UTF-8, naming its field: the generated code refuses to marshal
// such a table, and Unmarshal (like proto.Unmarshal) refuses to read it.
func (t *NameTable) Validate() error {
	for _, k := range slices.Sorted(maps.Keys(t.GetTable())) {
		if !utf8.ValidString(k) {
			return fmt.Errorf("nds: NameTable.table key %q: %w", k, errInvalidUTF8)
		}
		ni := t.Table[k]
		for _, f := range []struct {
			name string
			ss   []string
		}{
			{"ips", ni.GetIps()},
			{"registry", []string{ni.GetRegistry()}},
			{"shortname", []string{ni.GetShortname()}},
			{"namespace", []string{ni.GetNamespace()}},
			{"alt_hosts", ni.GetAltHosts()},
		} {
			for _, s := range f.ss {
				if !utf8.ValidString(s) {
					return fmt.Errorf("nds: NameTable.table[%q].%s %q: %w", k, f.name, s, errInvalidUTF8)
				}
			}
		}
	}
	return nil
}

// Unmarshal replaces t with the NameTable encoded in b, as proto.Unmarshal
// does for the generated type: unknown fields are skipped, and so is a
// known field whose wire type is not the declared one (protobuf treats it
// as unknown); of a string field the last value counts, a repeated field's
// values are appended, a map entry without a key has key "" and one
// without a value an empty NameInfo, a value given twice in one entry is
// merged, and of two entries with one key the last counts. Truncated or
// malformed input, and strings that are not valid UTF-8, are errors that
// name the field; t is then left empty. Unknown fields are not kept.
func (t *NameTable) Unmarshal(b []byte) error {
	if t == nil {
		return errors.New("nds: Unmarshal into a nil NameTable")
	}
	*t = NameTable{}
	var table map[string]*NameTable_NameInfo
	err := walk(b, "NameTable", tableFields, func(num protowire.Number, v []byte) error {
		if num != fieldTable {
			return nil
		}
		k, ni, err := unmarshalEntry(v)
		if err != nil {
			return err
		}
		if table == nil {
			table = map[string]*NameTable_NameInfo{}
		}
		table[k] = ni
		return nil
	})
	if err != nil {
		return err
	}
	t.Table = table
	return nil
}

// unmarshalEntry decodes one entry of NameTable.table.
func unmarshalEntry(b []byte) (string, *NameTable_NameInfo, error) {
	var key string
	ni := &NameTable_NameInfo{}
	err := walk(b, "NameTable.table", entryFields, func(num protowire.Number, v []byte) error {
		switch num {
		case fieldEntryKey:
			if !utf8.Valid(v) {
				return fmt.Errorf("nds: NameTable.table key: %w", errInvalidUTF8)
			}
			key = string(v)
		case fieldEntryValue:
			return ni.merge(v)
		}
		return nil
	})
	return key, ni, err
}

// merge decodes b into ni, keeping what ni holds: a later string replaces
// an earlier one, repeated values are appended.
func (ni *NameTable_NameInfo) merge(b []byte) error {
	return walk(b, "NameTable.table.value", infoFields, func(num protowire.Number, v []byte) error {
		if int(num) >= len(infoFields) {
			return nil
		}
		if !utf8.Valid(v) {
			return fmt.Errorf("nds: NameTable.table.value.%s: %w", infoFields[num], errInvalidUTF8)
		}
		switch s := string(v); num {
		case fieldIps:
			ni.Ips = append(ni.Ips, s)
		case fieldRegistry:
			ni.Registry = s
		case fieldShortname:
			ni.Shortname = s
		case fieldNamespace:
			ni.Namespace = s
		case fieldAltHosts:
			ni.AltHosts = append(ni.AltHosts, s)
		}
		return nil
	})
}

// The field names of each message, by field number, for errors.
var (
	tableFields = []string{fieldTable: "table"}
	entryFields = []string{fieldEntryKey: "key", fieldEntryValue: "value"}
	infoFields  = []string{fieldIps: "ips", fieldRegistry: "registry", fieldShortname: "shortname",
		fieldNamespace: "namespace", fieldAltHosts: "alt_hosts"}
)

// walk calls field for each length-delimited field of the message in b,
// in order, with its contents, and skips every other field (all the known
// fields of nds.proto are length-delimited, so the others are unknown).
// msg names the message and names its fields in errors. It fails where
// proto.Unmarshal fails: on a bad tag or a field number out of range, a
// truncated field, or a group that does not end.
func walk(b []byte, msg string, names []string, field func(num protowire.Number, v []byte) error) error {
	fieldName := func(num protowire.Number) string {
		if int(num) < len(names) && names[num] != "" {
			return msg + "." + names[num]
		}
		return fmt.Sprintf("%s field %d", msg, num)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("nds: %s: field tag: %w", msg, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("nds: %s: field number %d out of range", msg, num)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("nds: %s (wire type %d): %w", fieldName(num), typ, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("nds: %s: %w", fieldName(num), protowire.ParseError(n))
		}
		b = b[n:]
		if err := field(num, v); err != nil {
			return err
		}
	}
	return nil
}
