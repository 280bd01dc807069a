package inject

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// fragment is the template's output.
type fragment struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec map[string]json.RawMessage `json:"spec"`
}

// injected names what the template added, for sidecar.istio.io/status.
type injected struct {
	InitContainers   []string `json:"initContainers"`
	Containers       []string `json:"containers"`
	Volumes          []string `json:"volumes"`
	ImagePullSecrets []string `json:"imagePullSecrets"`
	Revision         string   `json:"revision"`
}

// strictDecode decodes JSON, refusing unknown fields.
func strictDecode(js []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// parseFragment reads the rendered template. Unknown fields are errors, so
// a template mistake is reported, not silently dropped.
func parseFragment(js []byte) (*fragment, []corev1.Container, []corev1.Container, []corev1.Volume, error) {
	var f fragment
	if err := strictDecode(js, &f); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("injection template output: %w", err)
	}
	var spec corev1.PodSpec
	if f.Spec != nil {
		raw, _ := json.Marshal(f.Spec)
		if err := strictDecode(raw, &spec); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("injection template output: spec: %w", err)
		}
	}
	return &f, spec.InitContainers, spec.Containers, spec.Volumes, nil
}

// overlay merges a template container with the pod's own container of the
// same name, as Istio does: the template strategically merged over the
// pod's container, then the pod's container over that, so the pod's own
// settings win (the way users tune istio-proxy) and lists keyed by name
// keep the pod's entries first. An image of "auto" or "" keeps the
// template's image.
func overlay(tmpl, user corev1.Container) (corev1.Container, error) {
	own, err := json.Marshal(user)
	if err != nil {
		return tmpl, err
	}
	if user.Image == "auto" {
		user.Image = ""
	}
	patch, err := json.Marshal(tmpl)
	if err != nil {
		return tmpl, err
	}
	again, err := json.Marshal(user)
	if err != nil {
		return tmpl, err
	}
	merged, err := strategicpatch.StrategicMergePatch(own, patch, corev1.Container{})
	if err == nil {
		merged, err = strategicpatch.StrategicMergePatch(merged, again, corev1.Container{})
	}
	if err != nil {
		return tmpl, fmt.Errorf("merge the pod's container %s with the template's: %w", user.Name, err)
	}
	var out corev1.Container
	if err := json.Unmarshal(merged, &out); err != nil {
		return tmpl, fmt.Errorf("merge the pod's container %s with the template's: %w", user.Name, err)
	}
	return out, nil
}

// mergeContainers merges the template's containers into the pod's: one
// named like a pod's container is overlaid on it, the others are added.
// With tmplFirst (init containers) the template's come first, in the
// template's order; otherwise the pod's stay where they are and the new
// ones follow. It also returns the template's container names.
func mergeContainers(pod, tmpl []corev1.Container, tmplFirst bool) ([]corev1.Container, []string, error) {
	byName := map[string]corev1.Container{}
	for _, c := range pod {
		byName[c.Name] = c
	}
	merged := map[string]corev1.Container{}
	var names []string
	for _, t := range tmpl {
		if u, ok := byName[t.Name]; ok {
			var err error
			if t, err = overlay(t, u); err != nil {
				return nil, nil, err
			}
		}
		merged[t.Name] = t
		names = append(names, t.Name)
	}
	var out []corev1.Container
	if tmplFirst {
		for _, n := range names {
			out = append(out, merged[n])
		}
		for _, c := range pod {
			if _, ok := merged[c.Name]; !ok {
				out = append(out, c)
			}
		}
		return out, names, nil
	}
	for _, c := range pod {
		if m, ok := merged[c.Name]; ok {
			c = m
		}
		out = append(out, c)
	}
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			out = append(out, merged[n])
		}
	}
	return out, names, nil
}

// moveContainer puts the container called name first or last.
func moveContainer(cs []corev1.Container, name string, first bool) []corev1.Container {
	for i, c := range cs {
		if c.Name != name {
			continue
		}
		rest := append(append([]corev1.Container{}, cs[:i]...), cs[i+1:]...)
		if first {
			return append([]corev1.Container{c}, rest...)
		}
		return append(rest, c)
	}
	return cs
}

// apply merges a rendered fragment into pod (a copy owned by the caller)
// and returns what was added.
func apply(pod *corev1.Pod, js []byte, hold bool) (*injected, error) {
	f, inits, containers, volumes, err := parseFragment(js)
	if err != nil {
		return nil, err
	}
	st := &injected{InitContainers: []string{}, Containers: []string{}, Volumes: []string{}}
	nativeMove(pod, inits)
	if pod.Spec.InitContainers, st.InitContainers, err = mergeContainers(pod.Spec.InitContainers, inits, true); err != nil {
		return nil, err
	}
	if pod.Spec.Containers, st.Containers, err = mergeContainers(pod.Spec.Containers, containers, false); err != nil {
		return nil, err
	}
	// The proxy goes last, so kubectl exec and logs default to the app, or
	// first when the app waits for it (Istio orders them the same way).
	pod.Spec.Containers = moveContainer(pod.Spec.Containers, "istio-proxy", hold)
	// The template's volumes come first, then the pod's others (the order
	// of a strategic merge, as in Istio); a volume the pod names itself
	// stays the pod's.
	own := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		own[v.Name] = v
	}
	var vols []corev1.Volume
	added := map[string]bool{}
	for _, v := range volumes {
		st.Volumes = append(st.Volumes, v.Name)
		if o, ok := own[v.Name]; ok {
			v = o
		}
		if !added[v.Name] {
			vols = append(vols, v)
			added[v.Name] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !added[v.Name] {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
	// Any other spec field the template sets is merged strategically.
	other := map[string]json.RawMessage{}
	for k, v := range f.Spec {
		if k != "initContainers" && k != "containers" && k != "volumes" {
			other[k] = v
		}
	}
	if len(other) > 0 {
		base, err := json.Marshal(pod.Spec)
		if err != nil {
			return nil, err
		}
		patch, _ := json.Marshal(other)
		merged, err := strategicpatch.StrategicMergePatch(base, patch, corev1.PodSpec{})
		if err != nil {
			return nil, fmt.Errorf("merge the template's spec: %w", err)
		}
		var spec corev1.PodSpec
		if err := json.Unmarshal(merged, &spec); err != nil {
			return nil, fmt.Errorf("merge the template's spec: %w", err)
		}
		pod.Spec = spec
	}
	if len(f.Metadata.Labels) > 0 && pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range f.Metadata.Labels {
		pod.Labels[k] = v
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range f.Metadata.Annotations {
		pod.Annotations[k] = v
	}
	return st, nil
}
