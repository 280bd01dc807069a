package inject_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
)

// normalPod is a pod as a JSON object for comparison, scrubbed as Istio's
// own test scrubs it: no sidecar.istio.io/status (its order of names is
// an implementation detail) and no apiVersion on env fieldRefs.
func normalPod(t *testing.T, p *corev1.Pod) map[string]any {
	t.Helper()
	p = p.DeepCopy()
	delete(p.Annotations, annotation.SidecarStatus.Name)
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					e.ValueFrom.FieldRef.APIVersion = ""
				}
			}
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// diffPaths lists where got and want differ, one path each: map keys
// joined with dots, list entries that have a name by [name] (a list whose
// names are the same but ordered differently is "path (order)"), other
// list entries by [index].
func diffPaths(got, want any) []difference {
	var out []difference
	walk("", got, want, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// difference is one place where two objects differ.
type difference struct {
	path      string
	got, want any
}

func walk(path string, got, want any, out *[]difference) {
	if reflect.DeepEqual(got, want) || empty(got) && empty(want) {
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		for k := range keys {
			walk(join(path, k), g[k], w[k], out)
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		gn, wn := names(g), names(w)
		if gn != nil && wn != nil {
			byName := map[string]any{}
			for i, n := range gn {
				byName[n] = g[i]
			}
			seen := map[string]bool{}
			for i, n := range wn {
				seen[n] = true
				walk(fmt.Sprintf("%s[%s]", path, n), byName[n], w[i], out)
			}
			for i, n := range gn {
				if !seen[n] {
					walk(fmt.Sprintf("%s[%s]", path, n), g[i], nil, out)
				}
			}
			if sameSet(gn, wn) && !reflect.DeepEqual(gn, wn) {
				*out = append(*out, difference{path + " (order)", gn, wn})
			}
			return
		}
		if len(g) == len(w) {
			for i := range w {
				walk(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], out)
			}
			return
		}
	}
	*out = append(*out, difference{path, got, want})
}

// empty is true for nil and empty lists and maps (YAML writes them alike).
func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

func join(path, k string) string {
	if strings.ContainsAny(k, ".[]") {
		return path + "[" + k + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// names are the list entries' "name" fields, or nil when some entry has
// none or two share one.
func names(l []any) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range l {
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

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string{}, a...)
	y := append([]string{}, b...)
	sort.Strings(x)
	sort.Strings(y)
	return strings.Join(x, "\x00") == strings.Join(y, "\x00")
}
