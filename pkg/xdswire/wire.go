package xdswire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one field of an encoded message, as rangeFields hands it over.
type field struct {
	num protowire.Number
	typ protowire.Type
	// v is the payload of a length-delimited field, aliasing the input
	// with its capacity clipped.
	v []byte
	// x is the value of a varint, fixed32 or fixed64 field.
	x uint64
}

// rangeFields calls fn for every field of the message b, in the order they
// appear; for a group, which no message here has, fn gets the number and wire
// type only, to reject a known field or ignore an unknown one. msg names the
// message in errors.
func rangeFields(msg string, b []byte, fn func(f *field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("xdswire: decode %s: field tag: %w", msg, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			f.x = uint64(x)
		case protowire.Fixed64Type:
			f.x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.v, n = protowire.ConsumeBytes(b)
			f.v = f.v[:len(f.v):len(f.v)]
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("xdswire: decode %s: field %d: %w", msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(&f); err != nil {
			return err
		}
	}
	return nil
}

// wantType returns an error unless f has wire type want.
func (f *field) wantType(msg, name string, want protowire.Type) error {
	if f.typ == want {
		return nil
	}
	return fmt.Errorf("xdswire: decode %s.%s (field %d): wire type %s, want %s",
		msg, name, f.num, typeName(f.typ), typeName(want))
}

// str returns the length-delimited field f as a string.
func (f *field) str(msg, name string) (string, error) {
	if err := f.wantType(msg, name, protowire.BytesType); err != nil {
		return "", err
	}
	return string(f.v), nil
}

// bytes returns the payload of the length-delimited field f, aliasing the input.
func (f *field) bytes(msg, name string) ([]byte, error) {
	if err := f.wantType(msg, name, protowire.BytesType); err != nil {
		return nil, err
	}
	return f.v, nil
}

// varint returns the value of the varint field f.
func (f *field) varint(msg, name string) (uint64, error) {
	if err := f.wantType(msg, name, protowire.VarintType); err != nil {
		return 0, err
	}
	return f.x, nil
}

// mergeRaw returns old merged with another occurrence of the same embedded
// message field: on the wire, merging is concatenation. The first occurrence
// is kept as is, aliasing the input; later ones are copied.
func mergeRaw(old, v []byte) []byte {
	if old == nil {
		return v
	}
	out := make([]byte, 0, len(old)+len(v))
	return append(append(out, old...), v...)
}

// typeName names a wire type for error messages.
func typeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "bytes"
	case protowire.StartGroupType:
		return "group"
	case protowire.EndGroupType:
		return "end group"
	}
	return fmt.Sprintf("%d", int8(t))
}

// appendString appends field num holding s, unless s is empty (the proto3
// default, which is not written).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendEntryString appends field num holding s even if empty, as the key and
// value of a map entry are written.
func appendEntryString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendStrings appends field num once for every element of ss, empty ones included.
func appendStrings(b []byte, num protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

// appendMessage appends field num holding the message that enc appends to
// its argument. The length is written in one byte first, and the body moved
// along if it turns out longer, so no temporary buffer is needed.
func appendMessage(b []byte, num protowire.Number, enc func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = enc(append(b, 0))
	n := len(b) - start - 1
	extra := protowire.SizeVarint(uint64(n)) - 1
	if extra > 0 {
		b = append(b, make([]byte, extra)...)
		copy(b[start+1+extra:], b[start+1:start+1+n])
	}
	protowire.AppendVarint(b[:start], uint64(n))
	return b
}

// errStop stops rangeFields early without being an error.
var errStop = errors.New("stop")

// FieldString returns the first occurrence of the length-delimited field num
// of message b as a string, and whether it was found, without decoding the
// rest of the message. Fields may appear in any order and may repeat; for a
// singular field a conforming encoder writes one occurrence. Only the bytes up
// to that occurrence are parsed: an error means they are malformed, or the
// field has another wire type.
func FieldString(b []byte, num protowire.Number) (string, bool, error) {
	var s string
	err := rangeFields("message", b, func(f *field) error {
		if f.num != num {
			return nil
		}
		if err := f.wantType("message", fmt.Sprint(num), protowire.BytesType); err != nil {
			return err
		}
		s = string(f.v)
		return errStop // stop at the first occurrence
	})
	switch {
	case errors.Is(err, errStop):
		return s, true, nil
	case err != nil:
		return "", false, err
	}
	return "", false, nil
}

// StripFields returns a copy of message b without any occurrence of the
// fields nums, whatever their wire type. Every other field, unknown ones
// included, is kept byte for byte and in order. Fields may appear anywhere in
// a message and may repeat; all occurrences are removed. If b is malformed,
// the bytes from the first field that cannot be parsed on are kept as they are.
func StripFields(b []byte, nums ...protowire.Number) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return append(out, b...)
		}
		drop := false
		for _, x := range nums {
			if x == num {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// PrependField returns a new message: the length-delimited field num holding
// v, followed by the message b. Because fields may appear in any order and a
// later occurrence of a singular field wins (or, for an embedded message, is
// merged over the earlier one), a field of b with the same number takes
// precedence; use [StripFields] first to replace it.
func PrependField(b []byte, num protowire.Number, v []byte) []byte {
	out := make([]byte, 0, protowire.SizeTag(num)+protowire.SizeBytes(len(v))+len(b))
	out = protowire.AppendTag(out, num, protowire.BytesType)
	out = protowire.AppendBytes(out, v)
	return append(out, b...)
}
