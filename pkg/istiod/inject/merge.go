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

// overlay merges the pod's own container of the same name over a template
// container (strategic merge, as kubectl would): the way users tune
// istio-proxy. An image of "auto" or "" keeps the template's image.
func overlay(tmpl, user corev1.Container) (corev1.Container, error) {
	if user.Image == "auto" {
		user.Image = ""
	}
	base, err := json.Marshal(tmpl)
	if err != nil {
		return tmpl, err
	}
	patch, err := json.Marshal(user)
	if err != nil {
		return tmpl, err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, corev1.Container{})
	if err != nil {
		return tmpl, fmt.Errorf("merge the pod's container %s over the template's: %w", user.Name, err)
	}
	var out corev1.Container
	if err := json.Unmarshal(merged, &out); err != nil {
		return tmpl, fmt.Errorf("merge the pod's container %s over the template's: %w", user.Name, err)
	}
	return out, nil
}

// mergeContainers places the template's containers (overlaid by the pod's
// same-named ones) before or after the pod's others.
func mergeContainers(pod, tmpl []corev1.Container, tmplFirst bool) ([]corev1.Container, []string, error) {
	var rest []corev1.Container
	byName := map[string]corev1.Container{}
	for _, c := range pod {
		byName[c.Name] = c
	}
	var added []corev1.Container
	var names []string
	taken := map[string]bool{}
	for _, t := range tmpl {
		if u, ok := byName[t.Name]; ok {
			var err error
			if t, err = overlay(t, u); err != nil {
				return nil, nil, err
			}
			taken[t.Name] = true
		}
		added = append(added, t)
		names = append(names, t.Name)
	}
	for _, c := range pod {
		if !taken[c.Name] {
			rest = append(rest, c)
		}
	}
	if tmplFirst {
		return append(added, rest...), names, nil
	}
	return append(rest, added...), names, nil
}

// apply merges a rendered fragment into pod (a copy owned by the caller)
// and returns what was added.
func apply(pod *corev1.Pod, js []byte, hold bool) (*injected, error) {
	f, inits, containers, volumes, err := parseFragment(js)
	if err != nil {
		return nil, err
	}
	st := &injected{InitContainers: []string{}, Containers: []string{}, Volumes: []string{}}
	if pod.Spec.InitContainers, st.InitContainers, err = mergeContainers(pod.Spec.InitContainers, inits, true); err != nil {
		return nil, err
	}
	if pod.Spec.Containers, st.Containers, err = mergeContainers(pod.Spec.Containers, containers, hold); err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		have[v.Name] = true
	}
	for _, v := range volumes {
		st.Volumes = append(st.Volumes, v.Name)
		if !have[v.Name] {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
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
