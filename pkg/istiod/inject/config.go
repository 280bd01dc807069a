package inject

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/manifests"
)

// Policy is what happens to a pod that says nothing about injection.
type Policy string

// The injection policies.
const (
	// PolicyEnabled injects every pod the webhook is called for unless the
	// pod opts out (sidecar.istio.io/inject=false).
	PolicyEnabled Policy = "enabled"
	// PolicyDisabled injects only pods that opt in (sidecar.istio.io/inject=true).
	PolicyDisabled Policy = "disabled"
)

// ConfigMap keys of the istio-sidecar-injector ConfigMap, as Istio names them.
const (
	ConfigMapName = "istio-sidecar-injector"
	ConfigKey     = "config"
	ValuesKey     = "values"
)

// Config is the injector's configuration: the "config" key of the
// istio-sidecar-injector ConfigMap (policy, selectors, template) and its
// "values" key (the chart values the template reads).
type Config struct {
	// Policy applies to pods without an injection label or annotation.
	// Empty means the values' global.proxy.autoInject (enabled).
	Policy Policy `json:"policy,omitempty"`
	// AlwaysInjectSelector injects matching pods even with PolicyDisabled.
	AlwaysInjectSelector []metav1.LabelSelector `json:"alwaysInjectSelector,omitempty"`
	// NeverInjectSelector skips matching pods even with PolicyEnabled.
	NeverInjectSelector []metav1.LabelSelector `json:"neverInjectSelector,omitempty"`
	// InjectedAnnotations are added to every injected pod.
	InjectedAnnotations map[string]string `json:"injectedAnnotations,omitempty"`
	// Templates holds the injection templates by name: "sidecar" and the
	// others the chart ships (grpc-agent, grpc-simple) or the user adds.
	Templates map[string]string `json:"templates,omitempty"`
	// Template is the older single-template form, used as "sidecar" when
	// Templates has no "sidecar" entry.
	Template string `json:"template,omitempty"`
	// DefaultTemplates are the templates of pods without the
	// inject.istio.io/templates annotation, merged in order; empty means
	// ["sidecar"].
	DefaultTemplates []string `json:"defaultTemplates,omitempty"`
	// Aliases name lists of templates: a pod (or DefaultTemplates) asking
	// for an alias gets its templates, in order.
	Aliases map[string][]string `json:"aliases,omitempty"`

	// Values are the chart values the template reads as .Values, merged
	// over the istiod chart's defaults.
	Values map[string]any `json:"-"`
}

// SidecarTemplate is the name of the default template.
const SidecarTemplate = "sidecar"

// chartTemplates are the injection templates the istiod chart ships, by
// name, with their files in the embedded chart.
var chartTemplates = map[string]string{
	SidecarTemplate: manifests.InjectionTemplatePath,
	"grpc-agent":    "charts/istiod/files/grpc-agent.yaml",
	"grpc-simple":   "charts/istiod/files/grpc-simple.yaml",
}

// template returns the sidecar template text.
func (c *Config) template() string {
	if t, ok := c.Templates[SidecarTemplate]; ok {
		return t
	}
	return c.Template
}

// DefaultValues returns the istiod chart's values (the injector's defaults).
func DefaultValues() (map[string]any, error) {
	b, err := manifests.ReadFile(manifests.IstiodValuesPath)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("parse %s: %w", manifests.IstiodValuesPath, err)
	}
	return v, nil
}

// DefaultTemplate returns the istiod chart's injection template.
func DefaultTemplate() (string, error) {
	b, err := manifests.ReadFile(manifests.InjectionTemplatePath)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// DefaultConfig is the configuration the istiod chart installs: its
// templates and values, policy from the values.
func DefaultConfig() (Config, error) {
	tmpls := make(map[string]string, len(chartTemplates))
	for name, path := range chartTemplates {
		b, err := manifests.ReadFile(path)
		if err != nil {
			return Config{}, err
		}
		tmpls[name] = string(b)
	}
	vals, err := DefaultValues()
	if err != nil {
		return Config{}, err
	}
	return Config{Templates: tmpls, Values: vals}, nil
}

// ParseConfig reads the istio-sidecar-injector ConfigMap's two keys: config
// (YAML) and values (JSON or YAML). Either may be empty: a missing config
// uses the chart's templates, missing values the chart's values. A config
// without templates gets all of the chart's; one with templates but no
// sidecar template gets the chart's sidecar. Values are
// merged over the chart's defaults, so a ConfigMap may set only what it
// changes. Unknown keys in config are errors.
func ParseConfig(config, values []byte) (Config, error) {
	def, err := DefaultConfig()
	if err != nil {
		return Config{}, err
	}
	c := def
	if len(bytes.TrimSpace(config)) > 0 {
		c = Config{}
		if err := yaml.UnmarshalStrict(config, &c); err != nil {
			return Config{}, fmt.Errorf("injector config: %w", err)
		}
		switch {
		case len(c.Templates) == 0 && c.Template == "":
			c.Templates = def.Templates
		case c.template() == "":
			c.Templates = maps.Clone(c.Templates)
			if c.Templates == nil {
				c.Templates = map[string]string{}
			}
			c.Templates[SidecarTemplate] = def.template()
		}
	}
	c.Values = def.Values
	if len(bytes.TrimSpace(values)) > 0 {
		var over map[string]any
		if err := yaml.Unmarshal(values, &over); err != nil {
			return Config{}, fmt.Errorf("injector values: %w", err)
		}
		c.Values = mergeValues(def.Values, over)
	}
	return c, nil
}

// LoadFiles reads the config and values files of a mounted
// istio-sidecar-injector ConfigMap (Istio mounts them at
// /var/lib/istio/inject/{config,values}). A missing file counts as empty.
func LoadFiles(configPath, valuesPath string) (Config, error) {
	read := func(p string) ([]byte, error) {
		if p == "" {
			return nil, nil
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read injector config: %w", err)
		}
		return b, nil
	}
	cfg, err := read(configPath)
	if err != nil {
		return Config{}, err
	}
	vals, err := read(valuesPath)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(cfg, vals)
}

// mergeValues returns base with over merged in: maps merge key by key,
// anything else in over replaces what base has.
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// lookup returns the value at a dotted path of values, and whether it is there.
func lookup(values map[string]any, path ...string) (any, bool) {
	var cur any = values
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}
