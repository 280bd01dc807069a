package inject_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/istiochart"
)

// chartDifferences are the cases where Skiff's chart templates differ
// from Istio's templates (beyond knownDifferences, which apply to both:
// they come from the injector, not the templates).
var chartDifferences = map[string]known{
	// Skiff's chart ships no gateway template (Istio's gateway deployments
	// ask for it with inject.istio.io/templates: gateway).
	"gateway.yaml.injected":                        {reason: "no gateway template", err: `template "gateway" not found`},
	"gateway-with-default-container.yaml.injected": {reason: "no gateway template", err: `template "gateway" not found`},
	"gateway-spire.yaml.injected":                  {reason: "no gateway template", err: `template "gateway" not found`},
	// Skiff's grpc-simple writes the same xDS bootstrap with a shell
	// here-document of its own; Istio's ISTIO_NAMESPACE ends in a newline
	// (a YAML block scalar), which would end up inside the server URI.
	"grpc-simple.yaml.injected": {reason: "own bootstrap script", paths: []string{
		"spec.initContainers[grpc-bootstrap-init].command[2]",
		"spec.initContainers[grpc-bootstrap-init].env[ISTIO_NAMESPACE].value",
	}},
}

// TestChartTemplatesMatchIstio injects Istio's test inputs with Skiff's
// own chart templates, given the values and mesh config Istio's chart
// installs, and compares with what Istio's templates give.
func TestChartTemplatesMatchIstio(t *testing.T) {
	dir := filepath.Join(istiochart.Source(t), "pkg", "kube", "inject", "testdata", "inject")
	for _, c := range allIstioCases(t, dir) {
		if c.want == "" {
			continue
		}
		t.Run(c.want, func(t *testing.T) {
			inst := c.install(t, dir)
			var vals map[string]any
			if err := json.Unmarshal(inst.Values, &vals); err != nil {
				t.Fatal(err)
			}
			var mesh map[string]any
			b, _ := json.Marshal(inst.Mesh)
			_ = json.Unmarshal(b, &mesh)
			if c.mesh != nil {
				c.mesh(mesh)
			}
			vals["meshConfig"] = mesh
			vb, _ := json.Marshal(vals)
			// Skiff's chart templates, with the values' own templates added
			// as Skiff's chart adds them to its ConfigMap.
			var config []byte
			if own, ok := vals["sidecarInjectorWebhook"].(map[string]any)["templates"].(map[string]any); ok && len(own) > 0 {
				def, err := inject.DefaultConfig()
				if err != nil {
					t.Fatal(err)
				}
				all := map[string]any{}
				for k, v := range def.Templates {
					all[k] = v
				}
				for k, v := range own {
					all[k] = v
				}
				if config, err = yaml.Marshal(map[string]any{"templates": all}); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := inject.ParseConfig(config, vb)
			if err != nil {
				t.Fatal(err)
			}
			in, err := inject.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			in.SetNamespaces(istioNamespaces)
			in.SetNativeSidecars(!c.legacy)
			in.SetCompliancePolicy(c.compliance)
			diffs, err := c.inject(t, dir, in)
			k, ok := chartDifferences[c.want]
			if !ok {
				k = knownDifferences[c.want]
			}
			checkKnown(t, c, diffs, err, k)
		})
	}
}
