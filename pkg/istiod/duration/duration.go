// Package duration rewrites the duration-valued fields of Istio
// configuration from every spelling Istio accepts into the form protojson
// reads.
//
// Istio's API server schema checks durations with CEL's duration(), and
// istio.io/api's JSON unmarshalers read them with time.ParseDuration, so
// "300ms", "1h", "1m30s" and "0.2s" are all valid; protojson accepts only
// seconds ("0.300s"). NormalizeJSON bridges the two before protojson runs.
package duration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
)

const durationName = "google.protobuf.Duration"

// Error is a duration field whose value Istio would not accept.
type Error struct {
	// Field is the JSON path of the field ("http[0].timeout").
	Field string
	// Value is the value as written.
	Value string
	// Err says what is wrong.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: invalid duration %s: %v", e.Field, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Parse reads a duration the way Istio does (Go's time.ParseDuration
// syntax, which includes protojson's "1.5s").
func Parse(s string) (time.Duration, error) {
	return time.ParseDuration(s)
}

// Format writes d as protojson writes a google.protobuf.Duration: seconds,
// with 0, 3, 6 or 9 fractional digits, and an "s".
func Format(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	sec, nsec := int64(d/time.Second), int64(d%time.Second)
	s := sign + strconv.FormatInt(sec, 10)
	if nsec != 0 {
		frac := fmt.Sprintf("%09d", nsec)
		switch {
		case strings.HasSuffix(frac, "000000"):
			frac = frac[:3]
		case strings.HasSuffix(frac, "000"):
			frac = frac[:6]
		}
		s += "." + frac
	}
	return s + "s"
}

// NormalizeJSON returns the JSON b of a message of type md (an Istio spec,
// such as VirtualService) with every google.protobuf.Duration field
// rewritten into protojson's form. Fields it does not know are left as
// they are for protojson to judge; an invalid duration is an *Error naming
// the field and the value.
func NormalizeJSON(md protoreflect.MessageDescriptor, b []byte) ([]byte, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	changed, err := walkMessage(md, v, "")
	if err != nil {
		return nil, err
	}
	if !changed {
		return b, nil
	}
	return json.Marshal(v)
}

// walkMessage rewrites the durations in v, a JSON object of type md, in
// place; it reports whether anything changed.
func walkMessage(md protoreflect.MessageDescriptor, v any, path string) (bool, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return false, nil // not an object: protojson reports it
	}
	changed := false
	for key, val := range obj {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		if fd == nil || val == nil {
			continue
		}
		fp := join(path, key)
		var c bool
		var err error
		switch {
		case fd.IsMap():
			c, err = walkMap(fd.MapValue(), val, fp)
		case fd.IsList():
			c, err = walkList(fd, val, fp)
		default:
			var nv any
			nv, c, err = walkValue(fd, val, fp)
			if c {
				obj[key] = nv
			}
		}
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func walkMap(fd protoreflect.FieldDescriptor, v any, path string) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return false, nil
	}
	changed := false
	for k, val := range m {
		nv, c, err := walkValue(fd, val, fmt.Sprintf("%s[%q]", path, k))
		if err != nil {
			return false, err
		}
		if c {
			m[k] = nv
			changed = true
		}
	}
	return changed, nil
}

func walkList(fd protoreflect.FieldDescriptor, v any, path string) (bool, error) {
	l, ok := v.([]any)
	if !ok {
		return false, nil
	}
	changed := false
	for i, val := range l {
		nv, c, err := walkValue(fd, val, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return false, err
		}
		if c {
			l[i] = nv
			changed = true
		}
	}
	return changed, nil
}

// walkValue handles one value of field fd (a list element, a map value or
// a singular field) and returns its replacement when it changed.
func walkValue(fd protoreflect.FieldDescriptor, v any, path string) (any, bool, error) {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return v, false, nil
	}
	md := fd.Message()
	if md.FullName() == durationName {
		s, ok := v.(string)
		if !ok {
			return v, false, nil // protojson reports the type
		}
		d, err := Parse(s)
		if err != nil {
			return nil, false, &Error{Field: path, Value: strconv.Quote(s), Err: err}
		}
		out := Format(d)
		return out, out != s, nil
	}
	if md.FullName().Parent() == "google.protobuf" {
		return v, false, nil // other well-known types keep their own JSON forms
	}
	c, err := walkMessage(md, v, path)
	return v, c, err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
