package xdswire

import (
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxStructDepth bounds the nesting of maps and lists in a Struct, so that a
// map that contains itself is an error rather than a stack overflow.
const maxStructDepth = 100

// appendStruct appends the fields of the google.protobuf.Struct m to b, its
// keys sorted. path names m in errors. On error, the functions here return
// the partly appended b as well, for appendMessage to finish; callers drop it.
func appendStruct(b []byte, m map[string]any, path string, depth int) ([]byte, error) {
	if depth > maxStructDepth {
		return b, fmt.Errorf("xdswire: encode %s: nested deeper than %d", path, maxStructDepth)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		// fields (1): map entries of key (1) and value (2).
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendEntryString(b, 1, k)
			b, err = appendValueField(b, 2, m[k], path+"."+k, depth)
			return b
		})
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendStringStruct is appendStruct for a map of strings.
func appendStringStruct(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendEntryString(b, 1, k)
			return appendMessage(b, 2, func(b []byte) []byte {
				return appendStringValue(b, m[k])
			})
		})
	}
	return b
}

// appendList appends the fields of a google.protobuf.ListValue to b.
func appendList(b []byte, n int, elem func(i int) any, path string, depth int) ([]byte, error) {
	if depth > maxStructDepth {
		return b, fmt.Errorf("xdswire: encode %s: nested deeper than %d", path, maxStructDepth)
	}
	var err error
	for i := 0; i < n && err == nil; i++ {
		// values (1)
		b, err = appendValueField(b, 1, elem(i), fmt.Sprintf("%s[%d]", path, i), depth)
	}
	return b, err
}

// appendValueField appends field num holding v as a google.protobuf.Value.
func appendValueField(b []byte, num protowire.Number, v any, path string, depth int) ([]byte, error) {
	var err error
	b = appendMessage(b, num, func(b []byte) []byte {
		b, err = appendValue(b, v, path, depth)
		return b
	})
	return b, err
}

// appendValue appends the fields of the google.protobuf.Value v to b: its
// kind is null_value (1), number_value (2), string_value (3), bool_value (4),
// struct_value (5) or list_value (6).
func appendValue(b []byte, v any, path string, depth int) ([]byte, error) {
	if x, ok := number(v); ok {
		b = protowire.AppendTag(b, 2, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(x)), nil
	}
	var err error
	switch v := v.(type) {
	case nil:
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 0)
	case string:
		b = appendStringValue(b, v)
	case bool:
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v))
	case map[string]any:
		b = appendMessage(b, 5, func(b []byte) []byte {
			b, err = appendStruct(b, v, path, depth+1)
			return b
		})
	case map[string]string:
		b = appendMessage(b, 5, func(b []byte) []byte {
			return appendStringStruct(b, v)
		})
	case []any:
		b = appendMessage(b, 6, func(b []byte) []byte {
			b, err = appendList(b, len(v), func(i int) any { return v[i] }, path, depth+1)
			return b
		})
	case []string:
		b = appendMessage(b, 6, func(b []byte) []byte {
			b, err = appendList(b, len(v), func(i int) any { return v[i] }, path, depth+1)
			return b
		})
	default:
		return b, fmt.Errorf("xdswire: encode %s: unsupported type %T", path, v)
	}
	return b, err
}

// appendStringValue appends the fields of a Value holding the string s.
// string_value is a oneof member, so it is written even when empty.
func appendStringValue(b []byte, s string) []byte {
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// number returns v as a float64 if it is a Go number.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int8:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint8:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint64:
		return float64(v), true
	}
	return 0, false
}
