package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// span is a half-open byte range [start, end) of a JSON document.
type span struct{ start, end int }

// member is one top-level key of a JSON object and where its value lies.
type member struct {
	key   string
	value span
}

// layout is where the parts of a CNI configuration lie in its bytes, so
// that edits splice the text and leave every other byte as it was.
type layout struct {
	members []member
	// hasPlugins is set when the object has a "plugins" list; open is the
	// offset just after its '[', plugins the spans of its elements.
	hasPlugins bool
	open       int
	plugins    []span
}

// scan finds the top-level members of a JSON object and, when it has one,
// the elements of its "plugins" list.
func scan(data []byte) (layout, error) {
	var l layout
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return l, errors.New("CNI configuration is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return l, err
		}
		key, _ := tok.(string)
		if slices.ContainsFunc(l.members, func(m member) bool { return m.key == key }) {
			return l, fmt.Errorf("CNI configuration: key %q appears twice", key)
		}
		if key == "plugins" {
			start, err := l.scanPlugins(dec)
			if err != nil {
				return l, err
			}
			l.members = append(l.members, member{key, span{start, int(dec.InputOffset())}})
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return l, err
		}
		end := int(dec.InputOffset())
		l.members = append(l.members, member{key, span{end - len(raw), end}})
	}
	if _, err := dec.Token(); err != nil {
		return l, err
	}
	if _, err := dec.Token(); err == nil {
		return l, errors.New("CNI configuration: data after the object")
	}
	return l, nil
}

// scanPlugins reads the "plugins" value and returns the offset of its '['.
func (l *layout) scanPlugins(dec *json.Decoder) (int, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if tok != json.Delim('[') {
		return 0, errors.New(`CNI configuration: "plugins" is not a list`)
	}
	l.hasPlugins = true
	l.open = int(dec.InputOffset())
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, err
		}
		end := int(dec.InputOffset())
		l.plugins = append(l.plugins, span{end - len(raw), end})
	}
	if _, err := dec.Token(); err != nil { // ']'
		return 0, err
	}
	return l.open - 1, nil
}

// pluginType is the "type" of a plugin element, or "" when it has none.
func pluginType(raw []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &p)
	return p.Type
}

// cut returns data without the element k of the plugins list: the element
// and the separator before it (after it, for the first of several), so
// that cut undoes appendPlugin byte for byte.
func (l *layout) cut(data []byte, k int) []byte {
	var s span
	switch {
	case k > 0:
		s = span{l.plugins[k-1].end, l.plugins[k].end}
	case len(l.plugins) > 1:
		s = span{l.plugins[0].start, l.plugins[1].start}
	default:
		s = l.plugins[0]
	}
	out := make([]byte, 0, len(data)-(s.end-s.start))
	out = append(out, data[:s.start]...)
	return append(out, data[s.end:]...)
}

// appendPlugin returns data with raw added as the last element of the
// plugins list, indented like the element before it.
func (l *layout) appendPlugin(data []byte, raw []byte) ([]byte, error) {
	at, text := l.open, raw
	if n := len(l.plugins); n > 0 {
		at = l.plugins[n-1].end
		sep := data[l.open:l.plugins[n-1].start]
		if n > 1 {
			sep = data[l.plugins[n-2].end:l.plugins[n-1].start]
		}
		text = append([]byte(","), raw...)
		if i := bytes.LastIndexByte(sep, '\n'); i >= 0 {
			indent := string(sep[i+1 : i+1+len(sep[i+1:])-len(bytes.TrimLeft(sep[i+1:], " \t"))])
			var b bytes.Buffer
			if err := json.Indent(&b, raw, indent, "  "); err != nil {
				return nil, fmt.Errorf("indent our entry: %w", err)
			}
			nl := "\n"
			if bytes.HasSuffix(sep[:i], []byte("\r")) {
				nl = "\r\n"
			}
			text = append([]byte(","+nl+indent), bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte(nl))...)
		}
	}
	out := make([]byte, 0, len(data)+len(text))
	out = append(out, data[:at]...)
	out = append(out, text...)
	return append(out, data[at:]...), nil
}
