package analysis

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// hit is one place a rule's field is set.
type hit struct {
	path  string // "spec.http[0].mirror"
	value string // the enum value name, for rules with Values
}

// find returns where field (a Rule.Field) is set in spec, in order.
func find(spec protoreflect.Message, field string, values []string) []hit {
	segs := strings.Split(field, ".")
	if len(segs) == 0 || segs[0] != "spec" {
		return nil
	}
	if len(segs) == 1 {
		return []hit{{path: "spec"}}
	}
	var out []hit
	walk(spec, segs[1:], "spec", values, &out)
	return out
}

func walk(m protoreflect.Message, segs []string, path string, values []string, out *[]hit) {
	fd := m.Descriptor().Fields().ByJSONName(segs[0])
	if fd == nil || !m.Has(fd) {
		return
	}
	path += "." + fd.JSONName()
	v := m.Get(fd)
	visit := func(p string, v protoreflect.Value) {
		if len(segs) > 1 {
			if fd.Message() != nil {
				walk(v.Message(), segs[1:], p, values, out)
			}
			return
		}
		if len(values) == 0 {
			*out = append(*out, hit{path: p})
			return
		}
		if fd.Kind() != protoreflect.EnumKind {
			return
		}
		name := ""
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			name = string(ev.Name())
		}
		if slices.Contains(values, name) {
			*out = append(*out, hit{path: p, value: name})
		}
	}
	switch {
	case fd.IsMap():
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			visit(fmt.Sprintf("%s[%d]", path, i), l.Get(i))
		}
	default:
		visit(path, v)
	}
}

// resolves reports whether field names a field of desc's messages (for the
// support table's test).
func resolves(desc protoreflect.MessageDescriptor, field string) bool {
	segs := strings.Split(field, ".")
	for _, s := range segs[1:] {
		if desc == nil {
			return false
		}
		fd := desc.Fields().ByJSONName(s)
		if fd == nil {
			return false
		}
		desc = fd.Message()
	}
	return true
}
