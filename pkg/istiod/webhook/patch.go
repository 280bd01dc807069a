package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Op is one RFC 6902 JSON Patch operation.
type Op struct {
	// Op is "add", "remove" or "replace".
	Op string `json:"op"`
	// Path is a JSON Pointer (RFC 6901).
	Path string `json:"path"`
	// Value is the new value of add and replace (which always carry one,
	// even null, false, 0 or "").
	Value any `json:"value"`
}

// MarshalJSON leaves out the value of a remove, and only there.
func (o Op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	type plain Op
	return json.Marshal(plain(o))
}

// pointerEscape escapes a JSON Pointer token (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// CreatePatch returns the JSON Patch that turns the JSON document from
// into to. Objects are diffed key by key; arrays of objects with unique
// "name" fields (containers, volumes) are aligned by name so that inserting
// a container is one "add"; other arrays are diffed element by element when
// their lengths match, else replaced whole. Fields present in neither
// document are never touched.
func CreatePatch(from, to []byte) ([]Op, error) {
	var a, b any
	if err := json.Unmarshal(from, &a); err != nil {
		return nil, fmt.Errorf("patch source: %w", err)
	}
	if err := json.Unmarshal(to, &b); err != nil {
		return nil, fmt.Errorf("patch target: %w", err)
	}
	var ops []Op
	diff(&ops, "", a, b)
	return ops, nil
}

func diff(ops *[]Op, path string, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			diffObjects(ops, path, av, bv)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			diffArrays(ops, path, av, bv)
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*ops = append(*ops, Op{Op: "replace", Path: path, Value: b})
	}
}

func diffObjects(ops *[]Op, path string, a, b map[string]any) {
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			*ops = append(*ops, Op{Op: "remove", Path: path + "/" + pointerEscape(k)})
		}
	}
	for _, k := range sortedKeys(b) {
		p := path + "/" + pointerEscape(k)
		if av, ok := a[k]; ok {
			diff(ops, p, av, b[k])
		} else {
			*ops = append(*ops, Op{Op: "add", Path: p, Value: b[k]})
		}
	}
}

// names returns the "name" of each element, or nil if they are not all
// objects with distinct string names.
func names(arr []any) []string {
	out := make([]string, 0, len(arr))
	seen := map[string]bool{}
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return nil
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

func diffArrays(ops *[]Op, path string, a, b []any) {
	an, bn := names(a), names(b)
	if an != nil && bn != nil && len(a) > 0 {
		if diffNamed(ops, path, a, b, an, bn) {
			return
		}
	}
	if len(a) == len(b) {
		for i := range a {
			diff(ops, path+"/"+strconv.Itoa(i), a[i], b[i])
		}
		return
	}
	*ops = append(*ops, Op{Op: "replace", Path: path, Value: b})
}

// diffNamed aligns two arrays by element name: removes what is gone, adds
// what is new at its place, diffs what stays. It reports false (emitting
// nothing) when kept elements change order.
func diffNamed(ops *[]Op, path string, a, b []any, an, bn []string) bool {
	inB := map[string]int{}
	for i, n := range bn {
		inB[n] = i
	}
	// Kept elements must appear in the same relative order.
	last := -1
	for _, n := range an {
		if j, ok := inB[n]; ok {
			if j < last {
				return false
			}
			last = j
		}
	}
	var out []Op
	cur := make([]string, 0, len(an))
	curVal := map[string]any{}
	for i := len(an) - 1; i >= 0; i-- {
		if _, ok := inB[an[i]]; !ok {
			out = append(out, Op{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
		}
	}
	for i, n := range an {
		if _, ok := inB[n]; ok {
			cur = append(cur, n)
			curVal[n] = a[i]
		}
	}
	k := 0
	for j, n := range bn {
		p := path + "/" + strconv.Itoa(j)
		if k < len(cur) && cur[k] == n {
			diff(&out, p, curVal[n], b[j])
			k++
			continue
		}
		out = append(out, Op{Op: "add", Path: p, Value: b[j]})
	}
	*ops = append(*ops, out...)
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Rebase adapts ops, computed between two re-encodings of a document, to
// the document as it was received (raw): the re-encoding may have added
// empty parents (metadata: {creationTimestamp: null}) that raw lacks. An op
// under a parent missing from raw becomes one "add" of that parent with its
// value in target; a "replace" of a missing member becomes an "add"; a
// "remove" of a missing member is dropped. Each op is checked against the
// document as the ops before it leave it (an "add" of a container shifts
// the indices after it).
func Rebase(ops []Op, raw, target []byte) ([]Op, error) {
	var doc, tgt any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("patch source: %w", err)
	}
	if err := json.Unmarshal(target, &tgt); err != nil {
		return nil, fmt.Errorf("patch target: %w", err)
	}
	var out []Op
	var added []string // parents added whole: ops under them are in their value
	emit := func(op Op) {
		out = append(out, op)
		doc = applyOp(doc, Op{Op: op.Op, Path: op.Path, Value: deepCopy(op.Value)})
	}
ops:
	for _, op := range ops {
		for _, p := range added {
			if strings.HasPrefix(op.Path, p+"/") {
				continue ops
			}
		}
		tokens := strings.Split(op.Path, "/")[1:]
		// Find the first missing ancestor (or the member itself).
		missing := -1
		cur := doc
		for i, tok := range tokens {
			next, ok := child(cur, tok)
			if !ok {
				missing = i
				break
			}
			cur = next
		}
		switch {
		case missing < 0:
			emit(op)
		case missing == len(tokens)-1:
			// The member itself is missing; its parent exists.
			switch op.Op {
			case "remove":
			case "replace":
				op.Op = "add"
				emit(op)
			default:
				emit(op)
			}
		default:
			p := "/" + strings.Join(tokens[:missing+1], "/")
			v, ok := lookupPointer(tgt, tokens[:missing+1])
			if !ok {
				continue // the target has no such subtree either
			}
			added = append(added, p)
			emit(Op{Op: "add", Path: p, Value: v})
		}
	}
	return out, nil
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// applyOp applies one op to a decoded document in place (returning the
// new root); an op that does not fit the document leaves it as it is.
func applyOp(doc any, op Op) any {
	tokens := strings.Split(op.Path, "/")[1:]
	if len(tokens) == 0 {
		if op.Op == "remove" {
			return nil
		}
		return op.Value
	}
	parent, ok := lookupPointer(doc, tokens[:len(tokens)-1])
	if !ok {
		return doc
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		if op.Op == "remove" {
			delete(p, unescape(last))
		} else {
			p[unescape(last)] = op.Value
		}
	case []any:
		i := len(p)
		if last != "-" {
			n, err := strconv.Atoi(last)
			if err != nil || n < 0 || n > len(p) {
				return doc
			}
			i = n
		}
		switch {
		case op.Op == "add":
			p = append(p[:i], append([]any{op.Value}, p[i:]...)...)
		case i < len(p) && op.Op == "remove":
			p = append(p[:i], p[i+1:]...)
		case i < len(p):
			p[i] = op.Value
			return doc
		default:
			return doc
		}
		// The slice header changed: store it back in its parent.
		return applyOp(doc, Op{Op: "replace", Path: "/" + strings.Join(tokens[:len(tokens)-1], "/"), Value: p})
	}
	return doc
}

func unescape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// child returns a member of an object or array by pointer token.
func child(v any, tok string) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		c, ok := t[unescape(tok)]
		return c, ok
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(t) {
			return nil, false
		}
		return t[i], true
	}
	return nil, false
}

func lookupPointer(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		var ok bool
		if v, ok = child(v, tok); !ok {
			return nil, false
		}
	}
	return v, true
}
