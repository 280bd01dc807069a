package inject

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	agentconfig "github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/capture"
)

// environ resolves a container's env as the kubelet would, with fake pod facts.
func environ(c *corev1.Container) []string {
	fields := map[string]string{
		"metadata.name": "reviews-v1-abc", "metadata.namespace": "bookinfo", "status.podIP": "10.1.2.3",
		"spec.serviceAccountName": "bookinfo-reviews", "status.hostIP": "192.0.2.1", "spec.nodeName": "node-1",
	}
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = fields[e.ValueFrom.FieldRef.FieldPath]
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}

// writeLabels writes labels the way the kubelet writes a downward API
// metadata.labels file: key="quoted value" lines.
func writeLabels(t *testing.T, path string, labels map[string]string) {
	t.Helper()
	var b strings.Builder
	for k, v := range labels {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(v))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// TestInjectedPodsFitTheirBinaries: for every golden case, pilot-agent's
// own config loader accepts istio-proxy's environment and sees the rewritten
// probes, and istio-iptables' own parser accepts the init container's
// arguments and environment.
func TestInjectedPodsFitTheirBinaries(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			in, pod := gc.setup(t)
			res, err := in.Inject(pod, "")
			if err != nil {
				t.Fatal(err)
			}
			p := res.Pod
			proxy := container(p.Spec.Containers, "istio-proxy")
			if proxy == nil {
				t.Fatal("no istio-proxy")
			}
			if len(proxy.Args) < 2 || proxy.Args[0] != "proxy" || proxy.Args[1] != "sidecar" {
				t.Errorf("istio-proxy args %q, want proxy sidecar ...", proxy.Args)
			}
			cfg, err := agentconfig.Load(environ(proxy), "sidecar")
			if err != nil {
				t.Fatalf("pilot-agent refuses the injected environment: %v", err)
			}
			// The labels reach the agent through the istio-podinfo
			// downward API volume, as in Istio: write its labels file.
			cfg.WorkDir = t.TempDir()
			writeLabels(t, cfg.Path(agentconfig.PodLabelsPath), p.Labels)
			if err := cfg.ReadPodInfo(); err != nil {
				t.Fatal(err)
			}
			if cfg.PodName != "reviews-v1-abc" || cfg.InstanceIP != "10.1.2.3" || cfg.Identity.ServiceAccount != "bookinfo-reviews" || cfg.Labels["app"] != "reviews" {
				t.Errorf("agent config: pod %q ip %q sa %q labels %v", cfg.PodName, cfg.InstanceIP, cfg.Identity.ServiceAccount, cfg.Labels)
			}
			// Every rewritten probe has its original in ISTIO_KUBE_APP_PROBERS.
			for _, c := range p.Spec.Containers {
				for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
					if c.Name == "istio-proxy" || pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.IntValue() != int(cfg.Proxy.StatusPort) {
						continue
					}
					if cfg.AppProbers[pr.HTTPGet.Path] == nil {
						t.Errorf("probe %s of %s has no original in ISTIO_KUBE_APP_PROBERS", pr.HTTPGet.Path, c.Name)
					}
				}
			}
			init := container(p.Spec.InitContainers, "istio-init")
			if init == nil {
				init = container(p.Spec.InitContainers, "istio-validation")
			}
			if init == nil {
				if gc.name != "interception-none" {
					t.Fatal("no init container")
				}
				return
			}
			env := map[string]string{}
			for _, kv := range environ(init) {
				k, v, _ := cut(kv)
				env[k] = v
			}
			if init.Args[0] != "istio-iptables" {
				t.Fatalf("init args %q do not start with istio-iptables", init.Args)
			}
			cc, err := capture.Parse(init.Args[1:], capture.Environment{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}, io.Discard)
			if err != nil {
				t.Fatalf("istio-iptables refuses %q: %v", init.Args[1:], err)
			}
			if gc.name == "hold-dns-proxyconfig" && !cc.RedirectDNS {
				t.Error("DNS capture asked for in proxyMetadata but istio-iptables would not redirect DNS")
			}
			if gc.name == "cni" && (!cc.RunValidation || !cc.SkipRuleApply) {
				t.Error("with CNI the init container must only validate")
			}
		})
	}
}

func cut(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}
