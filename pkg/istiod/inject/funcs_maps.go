package inject

import (
	"encoding/json"
	"maps"
)

// The map functions of the injection templates (Istio's).

// omit is m without keys.
func omit(m map[string]string, keys ...string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// strdict builds a map[string]string from key, value pairs (a last key
// without a value maps to "").
func strdict(kv ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		if i+1 < len(kv) {
			out[kv[i]] = kv[i+1]
		} else {
			out[kv[i]] = ""
		}
	}
	return out
}

// mergeMaps merges ms, later maps winning; no maps gives nil.
func mergeMaps(ms ...map[string]string) map[string]string {
	if len(ms) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// toJSONMap is mergeMaps(ms...) as JSON.
func toJSONMap(ms ...map[string]string) string {
	b, err := json.Marshal(mergeMaps(ms...))
	if err != nil {
		return ""
	}
	return string(b)
}

// omitNil drops nil values from maps and lists, recursively; a map or
// list left empty becomes nil itself.
func omitNil(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if !hasNil(t) {
			return t
		}
		out := map[string]any{}
		for k, e := range t {
			if e = omitNil(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if !hasNil(t) {
			return t
		}
		var out []any
		for _, e := range t {
			if e = omitNil(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

// hasNil reports whether a nil value sits anywhere inside v.
func hasNil(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range t {
			if hasNil(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasNil(e) {
				return true
			}
		}
	}
	return false
}
