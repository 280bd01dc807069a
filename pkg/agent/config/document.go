package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A message is a decoded protobuf message of some messageType: its set
// fields by index. A value is, by kind: string, bool, int64 (the signed
// kinds), uint64 (the unsigned), float64 (float, double), []byte, int32
// (enum number), *message; a list is []any, a map map[string]any keyed by
// the key's canonical text. A field without explicit presence is stored
// only when its value is not the zero value, as protobuf-go stores it.
type message struct {
	t      *messageType
	fields map[int]any
}

func newMessage(t *messageType) *message { return &message{t: t, fields: map[int]any{}} }

// get is the value of the field named (JSON name), if set.
func (m *message) get(name string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.fields[m.t.fieldIndex(name)]
	return v, ok
}

// set sets the field named to v, or clears it when v is nil; setting a
// oneof member clears the others.
func (m *message) set(name string, v any) {
	i := m.t.fieldIndex(name)
	if v == nil {
		delete(m.fields, i)
		return
	}
	m.clearOneof(i)
	m.fields[i] = v
}

// clearOneof clears the other members of field i's oneof.
func (m *message) clearOneof(i int) {
	o := m.t.Fields[i].Oneof
	if o == 0 {
		return
	}
	for j := range m.t.Fields {
		if j != i && m.t.Fields[j].Oneof == o {
			delete(m.fields, j)
		}
	}
}

// jsonObject is a JSON object with its members in order (encoding/json's
// maps lose the order, and with it which of two errors comes first).
type jsonObject []jsonMember

type jsonMember struct {
	Key   string
	Value any
}

// readJSON reads one JSON value: nil, bool, string, json.Number, []any or
// jsonObject.
func readJSON(js []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	v, err := readJSONValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func readJSONValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := jsonObject{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := readJSONValue(d)
			if err != nil {
				return nil, err
			}
			obj = append(obj, jsonMember{k.(string), v})
		}
		_, err := d.Token()
		return obj, err
	case json.Delim('['):
		list := []any{}
		for d.More() {
			v, err := readJSONValue(d)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.Token()
		return list, err
	}
	return tok, nil
}

// describe is a JSON value as an error quotes it.
func describe(v any) string {
	switch v := v.(type) {
	case jsonObject:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	case json.Number:
		return string(v)
	case string:
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		return strconv.Quote(v)
	}
	return fmt.Sprint(v)
}

// pathError is a field path and what is wrong with its value.
func pathError(path, format string, args ...any) error {
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// decodeMessage reads v as protojson reads a message of type t: fields by
// JSON or proto name, each at most once, null for unset, at most one
// member of each oneof.
func decodeMessage(t *messageType, v any, path string) (*message, error) {
	m := newMessage(t)
	switch t.WellKnown {
	case wellKnownDuration:
		s, ok := v.(string)
		if !ok {
			return nil, pathError(path, "%s is not a duration", describe(v))
		}
		secs, nanos, ok := parseDuration(s)
		if !ok {
			return nil, pathError(path, "%s is not a duration", describe(v))
		}
		if secs != 0 {
			m.fields[0] = secs
		}
		if nanos != 0 {
			m.fields[1] = int64(nanos)
		}
		return m, nil
	case wellKnownWrapper:
		x, err := decodeScalar(&t.Fields[0], v, path)
		if err != nil {
			return nil, err
		}
		if !isZero(x) {
			m.fields[0] = x
		}
		return m, nil
	}
	obj, ok := v.(jsonObject)
	if !ok {
		return nil, pathError(path, "%s is not an object", describe(v))
	}
	seen := make([]bool, len(t.Fields))
	seenOneof := make([]bool, len(t.Oneofs)+1)
	for _, mem := range obj {
		p := joinPath(path, mem.Key)
		i := t.fieldIndex(mem.Key)
		if i < 0 {
			return nil, pathError(p, "unknown field")
		}
		if seen[i] {
			return nil, pathError(p, "field given twice")
		}
		seen[i] = true
		if mem.Value == nil {
			continue
		}
		f := &t.Fields[i]
		switch {
		case f.MapKey != 0:
			x, err := decodeMap(f, mem.Value, p)
			if err != nil {
				return nil, err
			}
			if len(x) > 0 {
				m.fields[i] = x
			}
		case f.Repeated:
			x, err := decodeList(f, mem.Value, p)
			if err != nil {
				return nil, err
			}
			if len(x) > 0 {
				m.fields[i] = x
			}
		default:
			if f.Oneof != 0 {
				if seenOneof[f.Oneof] {
					return nil, pathError(p, "another field of oneof %s is set", t.Oneofs[f.Oneof-1])
				}
				seenOneof[f.Oneof] = true
			}
			x, err := decodeElem(f, mem.Value, p)
			if err != nil {
				return nil, err
			}
			if f.Presence || !isZero(x) {
				m.fields[i] = x
			}
		}
	}
	return m, nil
}

// decodeElem reads a single value of f's kind (a field, a list element or
// a map value).
func decodeElem(f *field, v any, path string) (any, error) {
	if f.Kind == kindMessage {
		return decodeMessage(f.Message, v, path)
	}
	return decodeScalar(f, v, path)
}

func decodeList(f *field, v any, path string) ([]any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, pathError(path, "%s is not a list", describe(v))
	}
	out := make([]any, 0, len(list))
	for i, e := range list {
		x, err := decodeElem(f, e, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func decodeMap(f *field, v any, path string) (map[string]any, error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return nil, pathError(path, "%s is not an object", describe(v))
	}
	out := make(map[string]any, len(obj))
	for _, mem := range obj {
		p := fmt.Sprintf("%s[%q]", path, mem.Key)
		k, ok := mapKey(f.MapKey, mem.Key)
		if !ok {
			return nil, pathError(p, "key is not a %s", kindName(f.MapKey))
		}
		if _, dup := out[k]; dup {
			return nil, pathError(p, "key given twice")
		}
		x, err := decodeElem(f, mem.Value, p)
		if err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, nil
}

// mapKey is a map key's canonical text, as protojson reads it: a string
// as it is, bool as true or false, integers in decimal.
func mapKey(k kind, s string) (string, bool) {
	var err error
	switch k {
	case kindString:
		return s, true
	case kindBool:
		return s, s == "true" || s == "false"
	case kindInt32, kindInt64:
		var n int64
		n, err = strconv.ParseInt(s, 10, bits(k))
		s = strconv.FormatInt(n, 10)
	case kindUint32, kindUint64:
		var n uint64
		n, err = strconv.ParseUint(s, 10, bits(k))
		s = strconv.FormatUint(n, 10)
	default:
		return "", false
	}
	return s, err == nil
}

func bits(k kind) int {
	switch k {
	case kindInt32, kindUint32, kindFloat:
		return 32
	}
	return 64
}

func kindName(k kind) string {
	return [...]string{"?", "string", "bool", "int32", "int64", "uint32", "uint64", "float", "double", "bytes", "enum", "message"}[k]
}

// decodeScalar reads a scalar or enum as protojson does: strings and bools
// as themselves; integers as JSON numbers or strings holding one, with an
// integral value in range (1e3 and 1.0 are integers); floats likewise, and
// "NaN", "Infinity", "-Infinity"; bytes as base64; enums by name or number.
func decodeScalar(f *field, v any, path string) (any, error) {
	bad := func() error {
		if f.Kind == kindEnum {
			return pathError(path, "%s is not a value of %s", describe(v), f.Enum.Name)
		}
		return pathError(path, "%s is not a%s %s", describe(v), article(f.Kind), kindName(f.Kind))
	}
	switch f.Kind {
	case kindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kindBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case kindInt32, kindInt64:
		if lit, ok := numberLiteral(v); ok {
			if s, ok := integerText(lit); ok {
				if n, err := strconv.ParseInt(s, 10, bits(f.Kind)); err == nil {
					return n, nil
				}
			}
		}
	case kindUint32, kindUint64:
		if lit, ok := numberLiteral(v); ok {
			if s, ok := integerText(lit); ok {
				if n, err := strconv.ParseUint(s, 10, bits(f.Kind)); err == nil {
					return n, nil
				}
			}
		}
	case kindFloat, kindDouble:
		switch v {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		if lit, ok := numberLiteral(v); ok {
			if x, err := strconv.ParseFloat(lit, bits(f.Kind)); err == nil {
				return x, nil
			}
		}
	case kindBytes:
		if s, ok := v.(string); ok {
			enc := base64.StdEncoding
			if strings.ContainsAny(s, "-_") {
				enc = base64.URLEncoding
			}
			if len(s)%4 != 0 {
				enc = enc.WithPadding(base64.NoPadding)
			}
			if b, err := enc.DecodeString(s); err == nil {
				return b, nil
			}
		}
	case kindEnum:
		switch v := v.(type) {
		case string:
			if n, ok := f.Enum.number(v); ok {
				return n, nil
			}
		case json.Number:
			if s, ok := integerText(string(v)); ok {
				if n, err := strconv.ParseInt(s, 10, 32); err == nil {
					return int32(n), nil
				}
			}
		}
	}
	return nil, bad()
}

func article(k kind) string {
	if k == kindInt32 || k == kindInt64 || k == kindUint32 || k == kindUint64 {
		return "n"
	}
	return ""
}

// numberLiteral is the text of a JSON number, or of a string that is
// exactly a JSON number literal (no spaces), as protojson accepts numbers.
func numberLiteral(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		return string(v), true
	case string:
		return v, isNumberLiteral(v)
	}
	return "", false
}

// isNumberLiteral reports whether s is a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumberLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	digits := func() int {
		n := 0
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
		return n
	}
	switch n := digits(); {
	case n == 0 || n > 1 && s[0] == '0':
		return false
	default:
		s = s[n:]
	}
	if strings.HasPrefix(s, ".") {
		s = s[1:]
		n := digits()
		if n == 0 {
			return false
		}
		s = s[n:]
	}
	if len(s) > 0 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			s = s[1:]
		}
		n := digits()
		if n == 0 {
			return false
		}
		s = s[n:]
	}
	return s == ""
}

// integerText is a JSON number literal's value as decimal integer text
// when the value is an integer (1.0, 1e3, 100e-2), without the exponent.
// Like protojson, it gives up past 20 digits.
func integerText(lit string) (string, bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant, exp = lit[:i], lit[i+1:]
	}
	intp, frac, _ := strings.Cut(mant, ".")
	intp = strings.TrimLeft(intp, "0")
	frac = strings.TrimRight(frac, "0")
	if intp == "" && frac == "" {
		return "0", true
	}
	e := 0
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 32)
		if err != nil {
			return "", false
		}
		e = int(n)
	}
	var digits string
	if e >= 0 {
		if len(frac) > e || len(intp)+e > 20 {
			return "", false
		}
		digits = intp + frac + strings.Repeat("0", e-len(frac))
	} else {
		if frac != "" {
			return "", false
		}
		cut := len(intp) + e
		if cut < 0 || strings.Trim(intp[cut:], "0") != "" {
			return "", false
		}
		digits = intp[:cut]
	}
	if neg {
		return "-" + digits, true
	}
	return digits, true
}

// maxDurationSeconds bounds a Duration, about 10,000 years.
const maxDurationSeconds = 315576000000

// parseDuration reads protojson's duration syntax: an optional sign,
// decimal seconds with at most nine fractional digits (1s, 1.5s, .5s, 1.s,
// -0.25s, +2s), and the suffix s; within ±315576000000 seconds.
func parseDuration(s string) (secs int64, nanos int32, ok bool) {
	if len(s) < 2 || s[len(s)-1] != 's' {
		return 0, 0, false
	}
	s = s[:len(s)-1]
	neg := false
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	intp, frac, hasFrac := strings.Cut(s, ".")
	if s == "" || intp == "" && !hasFrac || len(intp) > 1 && intp[0] == '0' || len(frac) > 9 ||
		strings.Trim(intp, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, 0, false
	}
	if intp != "" {
		n, err := strconv.ParseInt(intp, 10, 64)
		if err != nil || n > maxDurationSeconds {
			return 0, 0, false
		}
		secs = n
	}
	if frac != "" {
		n, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 32)
		nanos = int32(n)
	}
	if neg {
		secs, nanos = -secs, -nanos
	}
	return secs, nanos, true
}

// formatDuration writes a Duration as protojson does (0, 3, 6 or 9
// fractional digits), or fails as protojson fails on an invalid one.
func formatDuration(secs, nanos int64) (string, error) {
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos <= -1e9 || nanos >= 1e9 ||
		secs > 0 && nanos < 0 || secs < 0 && nanos > 0 {
		return "", fmt.Errorf("invalid duration: %d seconds and %d nanoseconds", secs, nanos)
	}
	sign := ""
	if secs < 0 || nanos < 0 {
		sign, secs, nanos = "-", -secs, -nanos
	}
	x := fmt.Sprintf("%s%d.%09d", sign, secs, nanos)
	x = strings.TrimSuffix(x, "000")
	x = strings.TrimSuffix(x, "000")
	x = strings.TrimSuffix(x, ".000")
	return x + "s", nil
}

// durationOf is a Duration message as a time.Duration, saturating where
// it overflows (as durationpb's AsDuration).
func durationOf(m *message) time.Duration {
	secs, _ := m.fields[0].(int64)
	nanos, _ := m.fields[1].(int64)
	d := time.Duration(secs) * time.Second
	overflow := d/time.Second != time.Duration(secs)
	d += time.Duration(nanos)
	overflow = overflow || secs < 0 && nanos < 0 && d > 0 || secs > 0 && nanos > 0 && d < 0
	switch {
	case overflow && secs < 0:
		return math.MinInt64
	case overflow && secs > 0:
		return math.MaxInt64
	}
	return d
}

// durationMessage is d as a Duration message of type t.
func durationMessage(t *messageType, d time.Duration) *message {
	m := newMessage(t)
	if s := int64(d / time.Second); s != 0 {
		m.fields[0] = s
	}
	if n := int64(d % time.Second); n != 0 {
		m.fields[1] = n
	}
	return m
}

// isZero reports whether a scalar is its kind's zero value. A float's -0
// counts as zero: protobuf-go keeps it in the message protojson fills,
// but proto.Merge (and Clone) copy a float only when it is != 0, so it
// never reaches the merged config.
func isZero(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case bool:
		return !v
	case int64:
		return v == 0
	case uint64:
		return v == 0
	case float64:
		return v == 0
	case []byte:
		return len(v) == 0
	case int32:
		return v == 0
	}
	return false
}

// merge merges src into dst as proto.Merge does: set scalars replace,
// lists append, map entries replace by key, messages merge field by field
// (well-known ones too: a Duration's seconds and nanos each), and setting
// a oneof member clears the others.
func merge(dst, src *message) {
	for i, v := range src.fields {
		f := &dst.t.Fields[i]
		switch {
		case f.MapKey != 0:
			d, _ := dst.fields[i].(map[string]any)
			if d == nil {
				d = map[string]any{}
			}
			for k, x := range v.(map[string]any) {
				d[k] = clone(x)
			}
			dst.fields[i] = d
		case f.Repeated:
			d, _ := dst.fields[i].([]any)
			dst.fields[i] = append(d, clone(v).([]any)...)
		case f.Kind == kindMessage:
			dst.clearOneof(i)
			if d, ok := dst.fields[i].(*message); ok {
				merge(d, v.(*message))
			} else {
				dst.fields[i] = clone(v)
			}
		default:
			dst.clearOneof(i)
			dst.fields[i] = clone(v)
		}
	}
}

// clone is a deep copy of a value.
func clone(v any) any {
	switch v := v.(type) {
	case *message:
		m := newMessage(v.t)
		for i, x := range v.fields {
			m.fields[i] = clone(x)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = clone(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = clone(x)
		}
		return out
	case []byte:
		return slices.Clone(v)
	}
	return v
}

// encodeMessage is m as protojson.Marshal writes it, then decoded by
// encoding/json into an any: objects map[string]any by JSON name, numbers
// float64, 64-bit integers strings, enums names (numbers when unnamed).
func encodeMessage(m *message) (any, error) {
	switch m.t.WellKnown {
	case wellKnownDuration:
		secs, _ := m.fields[0].(int64)
		nanos, _ := m.fields[1].(int64)
		return formatDuration(secs, nanos)
	case wellKnownWrapper:
		v, ok := m.fields[0]
		if !ok {
			v = zero(m.t.Fields[0].Kind)
		}
		return encodeScalar(&m.t.Fields[0], v), nil
	}
	out := make(map[string]any, len(m.fields))
	for i, v := range m.fields {
		f := &m.t.Fields[i]
		var err error
		switch {
		case f.MapKey != 0:
			src := v.(map[string]any)
			d := make(map[string]any, len(src))
			for k, x := range src {
				if d[k], err = encodeElem(f, x); err != nil {
					return nil, err
				}
			}
			out[f.JSONName] = d
		case f.Repeated:
			src := v.([]any)
			d := make([]any, len(src))
			for k, x := range src {
				if d[k], err = encodeElem(f, x); err != nil {
					return nil, err
				}
			}
			out[f.JSONName] = d
		default:
			if out[f.JSONName], err = encodeElem(f, v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func encodeElem(f *field, v any) (any, error) {
	if m, ok := v.(*message); ok {
		return encodeMessage(m)
	}
	return encodeScalar(f, v), nil
}

func zero(k kind) any {
	switch k {
	case kindString:
		return ""
	case kindBool:
		return false
	case kindInt32, kindInt64:
		return int64(0)
	case kindUint32, kindUint64:
		return uint64(0)
	case kindFloat, kindDouble:
		return 0.0
	case kindBytes:
		return []byte(nil)
	case kindEnum:
		return int32(0)
	}
	return nil
}

func encodeScalar(f *field, v any) any {
	switch v := v.(type) {
	case int64:
		if f.Kind == kindInt64 {
			return strconv.FormatInt(v, 10)
		}
		return float64(v)
	case uint64:
		if f.Kind == kindUint64 {
			return strconv.FormatUint(v, 10)
		}
		return float64(v)
	case float64:
		switch {
		case math.IsNaN(v):
			return "NaN"
		case math.IsInf(v, 1):
			return "Infinity"
		case math.IsInf(v, -1):
			return "-Infinity"
		case f.Kind == kindFloat:
			// Written as the shortest float32 text, read back as a float64.
			x, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
			return x
		}
		return v
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case int32:
		if name, ok := f.Enum.name(v); ok {
			return name
		}
		return float64(v)
	}
	return v
}
