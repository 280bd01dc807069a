package inject

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	agentconfig "github.com/skiff-mesh/skiff/pkg/agent/config"
)

// templateCases are golden pods injected with templates other than the
// default sidecar, chosen by the inject.istio.io/templates annotation.
var templateCases = []goldenCase{
	{name: "grpc-agent", edit: annotate("inject.istio.io/templates", "grpc-agent")},
	{name: "grpc-simple", edit: annotate("inject.istio.io/templates", "grpc-simple")},
	// A later template's fields win over an earlier one's.
	{name: "sidecar-then-custom", edit: annotate("inject.istio.io/templates", "sidecar, custom"), config: customConfig},
	// defaultTemplates apply to pods without the annotation, through aliases.
	{name: "default-alias", config: customConfig + "defaultTemplates: [mesh]\naliases:\n  mesh: [sidecar, custom]\n"},
}

// customConfig adds a "custom" template that tunes istio-proxy and labels
// the pod.
const customConfig = `templates:
  custom: |
    metadata:
      labels:
        example.com/custom: "yes"
    spec:
      containers:
      - name: istio-proxy
        env:
        - name: CUSTOM
          value: "1"
        resources:
          limits:
            memory: 2Gi
`

func TestGoldenTemplatePods(t *testing.T) {
	for _, gc := range templateCases {
		t.Run(gc.name, func(t *testing.T) {
			in, pod := gc.setup(t)
			res, err := in.Inject(pod, "")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, in, res, gc.name)
		})
	}
}

// TestGRPCAgentFitsTheAgent: the grpc-agent pod runs pilot-agent without
// Envoy, and the app containers find the agent's bootstrap and certificates
// on volumes they share with it.
func TestGRPCAgentFitsTheAgent(t *testing.T) {
	in := newInjector(t, "", "")
	pod := appPod()
	annotate("inject.istio.io/templates", "grpc-agent")(pod)
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	p := res.Pod
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("init containers %v: grpc-agent captures no traffic", p.Spec.InitContainers)
	}
	if n := len(p.Spec.Containers); n != 3 || p.Spec.Containers[n-1].Name != "istio-proxy" {
		t.Fatalf("containers %v: want the two apps in place, then istio-proxy", names(p.Spec.Containers))
	}
	proxy := container(p.Spec.Containers, "istio-proxy")
	cfg, err := agentconfig.Load(environ(proxy), "sidecar")
	if err != nil {
		t.Fatalf("pilot-agent refuses the injected environment: %v", err)
	}
	if !cfg.DisableEnvoy || cfg.DNSCapture {
		t.Errorf("agent: DisableEnvoy=%v DNSCapture=%v, want an agent without Envoy or DNS capture", cfg.DisableEnvoy, cfg.DNSCapture)
	}
	if cfg.Metadata["GENERATOR"] != "grpc" {
		t.Errorf("agent metadata GENERATOR=%q, want grpc", cfg.Metadata["GENERATOR"])
	}
	// The agent runs in /, so its relative paths are absolute in the pod.
	bootstrap := path.Join("/", cfg.GRPCBootstrap)
	certs := path.Join("/", cfg.OutputCerts)
	if cfg.GRPCBootstrap != agentconfig.GRPCBootstrapPath || certs != "/var/lib/istio/data" {
		t.Errorf("agent writes the bootstrap to %s and certificates to %s", cfg.GRPCBootstrap, cfg.OutputCerts)
	}
	r := proxy.ReadinessProbe
	if r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/healthz/ready" || r.HTTPGet.Port.IntValue() != 15020 {
		t.Errorf("istio-proxy readiness %+v, want /healthz/ready on 15020", r)
	}
	proxyVolumes := mountedAt(proxy)
	for _, c := range p.Spec.Containers {
		if c.Name == "istio-proxy" {
			continue
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["GRPC_XDS_BOOTSTRAP"] != bootstrap {
			t.Errorf("%s: GRPC_XDS_BOOTSTRAP=%q, want the agent's %s", c.Name, env["GRPC_XDS_BOOTSTRAP"], bootstrap)
		}
		apps := mountedAt(&c)
		for _, dir := range []string{path.Dir(bootstrap), certs} {
			if apps[dir] == "" || apps[dir] != proxyVolumes[dir] {
				t.Errorf("%s: %s is volume %q, istio-proxy's is %q: want the same volume", c.Name, dir, apps[dir], proxyVolumes[dir])
			}
		}
		want := appPod().Spec.Containers
		for _, w := range want {
			if w.Name == c.Name && !cmp.Equal(w.ReadinessProbe, c.ReadinessProbe) {
				t.Errorf("%s: readiness probe rewritten to %+v; grpc-agent leaves probes alone", c.Name, c.ReadinessProbe)
			}
		}
	}
	if v := p.Annotations["sidecar.istio.io/status"]; !strings.Contains(v, `"containers":["istio-proxy","reviews","grpc-side"]`) {
		t.Errorf("status %s", v)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// mountedAt maps a container's mount paths to their volumes.
func mountedAt(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, vm := range c.VolumeMounts {
		m[path.Clean(vm.MountPath)] = vm.Name
	}
	return m
}

// TestUnknownTemplateRefused: a pod asking for a template the configuration
// lacks is refused with an error naming the template and the known ones.
func TestUnknownTemplateRefused(t *testing.T) {
	in := newInjector(t, "", "")
	for _, v := range []string{"grpc-agnet", "sidecar,gateway", "sidecar,"} {
		t.Run(v, func(t *testing.T) {
			pod := appPod()
			annotate("inject.istio.io/templates", v)(pod)
			_, err := in.Inject(pod, "")
			var ae *AnnotationError
			if !errors.As(err, &ae) || ae.Annotation != "inject.istio.io/templates" {
				t.Fatalf("error %v, want an AnnotationError on inject.istio.io/templates", err)
			}
			if !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "grpc-agent, grpc-simple, sidecar") {
				t.Errorf("error %q does not say what is missing and what there is", err)
			}
		})
	}
}

func TestTemplateConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"unknown default", "defaultTemplates: [sidecar, nope]", `template "nope" not found`},
		{"alias to nothing", "defaultTemplates: [a]\naliases: {a: [sidecar, nope]}", `template "nope" not found`},
		{"broken other template", "templates:\n  other: \"{{ if }}\"", `injection template "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.config), nil)
			if err == nil {
				_, err = New(cfg, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestTemplateErrorNamesTemplate: a template whose output is wrong fails the
// injection naming it.
func TestTemplateErrorNamesTemplate(t *testing.T) {
	in := newInjector(t, "templates:\n  bad: \"spec:\\n  containers:\\n  - name: x\\n    imagee: y\\n\"\n", "")
	pod := appPod()
	annotate("inject.istio.io/templates", "sidecar,bad")(pod)
	_, err := in.Inject(pod, "")
	if err == nil || !strings.Contains(err.Error(), `template "bad"`) || !strings.Contains(err.Error(), "imagee") {
		t.Fatalf("error %v, want one naming template bad and the field", err)
	}
}

// TestGRPCSimpleBootstrapIsJSON runs grpc-simple's init script with a shell
// and checks that it writes a gRPC bootstrap naming istiod's xDS port.
func TestGRPCSimpleBootstrapIsJSON(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	in := newInjector(t, "", "")
	pod := appPod()
	annotate("inject.istio.io/templates", "grpc-simple")(pod)
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	init := container(res.Pod.Spec.InitContainers, "grpc-bootstrap-init")
	if init == nil || len(init.Command) != 3 {
		t.Fatalf("init container %+v", init)
	}
	dir := t.TempDir()
	script := strings.ReplaceAll(init.Command[2], "/var/lib/grpc/data/", dir+"/")
	cmd := exec.Command(sh, "-c", script)
	cmd.Env = environ(init)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bs struct {
		XDSServers []struct {
			ServerURI string `json:"server_uri"`
		} `json:"xds_servers"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
	}
	if err := json.Unmarshal(b, &bs); err != nil {
		t.Fatalf("bootstrap is not JSON: %v\n%s", err, b)
	}
	if len(bs.XDSServers) != 1 || bs.XDSServers[0].ServerURI != "dns:///istiod.istio-system.svc:15010" ||
		bs.Node.ID != "sidecar~10.1.2.3~reviews-v1-abc.bookinfo~cluster.local" {
		t.Errorf("bootstrap %s", b)
	}
}

// TestConfigTemplatesFilledIn: a config that names no templates gets the
// chart's; one with its own templates keeps them, plus the chart's sidecar.
func TestConfigTemplatesFilledIn(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   []string
	}{
		{"", []string{"grpc-agent", "grpc-simple", "sidecar"}},
		{"policy: enabled\n", []string{"grpc-agent", "grpc-simple", "sidecar"}},
		{"templates:\n  own: \"metadata: {}\"\n", []string{"own", "sidecar"}},
		{"template: \"metadata: {}\"\n", nil},
	} {
		cfg, err := ParseConfig([]byte(tc.config), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, sortedKeys(cfg.Templates)); d != "" && len(tc.want)+len(cfg.Templates) > 0 {
			t.Errorf("config %q: templates (-want +got):\n%s", tc.config, d)
		}
	}
}
