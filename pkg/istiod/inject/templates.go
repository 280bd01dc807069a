package inject

import (
	"fmt"
	"strings"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/skiff-mesh/skiff/pkg/gotmpl"
)

// templateSet is a configuration's compiled templates, as Istio selects
// them: the pod's inject.istio.io/templates annotation (a comma-separated
// list) or the configuration's defaultTemplates, each name resolved through
// the aliases, rendered in order and merged, a later template's fields
// winning over an earlier one's.
type templateSet struct {
	byName   map[string]*gotmpl.Template
	aliases  map[string][]string
	defaults []string
}

// compileTemplates parses every template of c (a mistake in any of them
// refuses the configuration) and checks that the default templates exist.
func compileTemplates(c *Config) (*templateSet, error) {
	texts := map[string]string{}
	for name, text := range c.Templates {
		texts[name] = text
	}
	if _, ok := texts[SidecarTemplate]; !ok && c.Template != "" {
		texts[SidecarTemplate] = c.Template
	}
	ts := &templateSet{byName: map[string]*gotmpl.Template{}, aliases: c.Aliases}
	for _, name := range sortedKeys(texts) {
		t, err := parseTemplate(name, texts[name])
		if err != nil {
			return nil, err
		}
		ts.byName[name] = t
	}
	defaults := c.DefaultTemplates
	if len(defaults) == 0 {
		defaults = []string{SidecarTemplate}
	}
	ts.defaults = ts.resolve(defaults)
	for _, name := range ts.defaults {
		if _, ok := ts.byName[name]; !ok {
			return nil, fmt.Errorf("injector config: defaultTemplates %q: template %q not found; have %s",
				strings.Join(defaults, ","), name, ts.known())
		}
	}
	return ts, nil
}

// resolve replaces each alias by its templates.
func (ts *templateSet) resolve(names []string) []string {
	var out []string
	for _, n := range names {
		if al, ok := ts.aliases[n]; ok {
			out = append(out, al...)
			continue
		}
		out = append(out, n)
	}
	return out
}

// known lists the template names, for errors.
func (ts *templateSet) known() string {
	return strings.Join(sortedKeys(ts.byName), ", ")
}

// forPod returns the names of the templates pod is injected with. A pod
// asking for a template the configuration lacks is refused (Istio fails
// the injection the same way).
func (ts *templateSet) forPod(pod *corev1.Pod) ([]string, error) {
	v, ok := pod.Annotations[annotation.InjectTemplates.Name]
	if !ok {
		return ts.defaults, nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	names = ts.resolve(names)
	for _, n := range names {
		if _, ok := ts.byName[n]; !ok {
			return nil, &AnnotationError{Annotation: annotation.InjectTemplates.Name, Value: v,
				Err: fmt.Errorf("template %q not found; have %s", n, ts.known())}
		}
	}
	return names, nil
}

// render runs the named templates with d and returns their fragments
// merged into one, as JSON. Each fragment is checked on its own first, so
// a mistake names its template.
func (ts *templateSet) render(names []string, d *Data) ([]byte, error) {
	var merged []byte
	for _, n := range names {
		js, err := render(ts.byName[n], d)
		if err != nil {
			return nil, err
		}
		if _, _, _, _, err := parseFragment(js); err != nil {
			return nil, fmt.Errorf("template %q: %w", n, err)
		}
		if merged == nil {
			merged = js
			continue
		}
		if merged, err = strategicpatch.StrategicMergePatch(merged, js, corev1.Pod{}); err != nil {
			return nil, fmt.Errorf("merge template %q over %q: %w", n, strings.Join(names, ","), err)
		}
	}
	return merged, nil
}
