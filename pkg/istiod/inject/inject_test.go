package inject

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files")

// appPod is a Deployment's pod with HTTP (named port), TCP, gRPC and exec probes.
func appPod() *corev1.Pod {
	yes := true
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "reviews-v1-7d9f8c6b5-",
			Namespace:    "bookinfo",
			Labels:       map[string]string{"app": "reviews", "version": "v1", "pod-template-hash": "7d9f8c6b5"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "reviews-v1-7d9f8c6b5", UID: "u1", Controller: &yes,
			}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: "bookinfo-reviews",
			Containers: []corev1.Container{{
				Name:  "reviews",
				Image: "example/reviews:v1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9080, Protocol: corev1.ProtocolTCP}},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}},
					PeriodSeconds: 10, TimeoutSeconds: 2,
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9080)}},
				},
				StartupProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
				},
			}, {
				Name:  "grpc-side",
				Image: "example/side:v1",
				LivenessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 7070}},
				},
			}},
		},
	}
}

type goldenCase struct {
	name   string
	values string // YAML values merged over the chart's
	config string // injector config YAML ("" = chart default)
	edit   func(p *corev1.Pod)
}

// setup returns the case's injector and its edited app pod.
func (gc goldenCase) setup(t *testing.T) (*Injector, *corev1.Pod) {
	t.Helper()
	in := newInjector(t, gc.config, gc.values)
	pod := appPod()
	if gc.edit != nil {
		gc.edit(pod)
	}
	return in, pod
}

// checkGolden compares an injected pod with the case's golden file and
// checks that injecting it again changes nothing.
func checkGolden(t *testing.T, in *Injector, res *Result, name string) {
	t.Helper()
	if !res.Injected {
		t.Fatalf("not injected: %s", res.Reason)
	}
	got, err := yaml.Marshal(res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", name+".golden.yaml"), got)
	again, err := in.Inject(res.Pod, "")
	if err != nil || again.Injected {
		t.Errorf("second injection: injected=%v err=%v", again != nil && again.Injected, err)
	}
}

func annotate(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

var goldenCases = []goldenCase{
	{name: "default"},
	{name: "cni", values: "istio_cni: {enabled: true}"},
	{name: "traffic-annotations", edit: annotate(
		"traffic.sidecar.istio.io/includeOutboundIPRanges", "10.0.0.0/8,172.16.0.0/12",
		"traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.96.0.1/32",
		"traffic.sidecar.istio.io/includeInboundPorts", "9080,9090",
		"traffic.sidecar.istio.io/excludeInboundPorts", "9090",
		"traffic.sidecar.istio.io/includeOutboundPorts", "5432",
		"traffic.sidecar.istio.io/excludeOutboundPorts", "6379,11211",
		"traffic.sidecar.istio.io/excludeInterfaces", "eth1",
		"istio.io/reroute-virtual-interfaces", "tap0",
	)},
	{name: "tproxy", edit: annotate("sidecar.istio.io/interceptionMode", "TPROXY")},
	{name: "interception-none", edit: annotate("sidecar.istio.io/interceptionMode", "NONE")},
	{name: "hold-dns-proxyconfig", edit: annotate(
		"proxy.istio.io/config", "holdApplicationUntilProxyStarts: true\nproxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"true\"\n",
	)},
	{name: "no-probe-rewrite-status-port", edit: annotate(
		"sidecar.istio.io/rewriteAppHTTPProbers", "false",
		"status.sidecar.istio.io/port", "15099",
		"readiness.status.sidecar.istio.io/periodSeconds", "5",
	)},
	{name: "status-port-zero", edit: annotate("status.sidecar.istio.io/port", "0")},
	{name: "proxy-override-resources", edit: func(p *corev1.Pod) {
		annotate("sidecar.istio.io/proxyCPU", "250m", "sidecar.istio.io/proxyMemoryLimit", "512Mi",
			"sidecar.istio.io/proxyImage", "registry.example/custom-proxy:1")(p)
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: "istio-proxy", Image: "auto",
			Env: []corev1.EnvVar{{Name: "EXTRA", Value: "1"}},
		})
	}},
	{name: "prometheus-merge", edit: annotate("prometheus.io/scrape", "true", "prometheus.io/port", "9102", "prometheus.io/path", "/m")},
	{name: "revision-and-injected-annotations", values: "revision: canary", config: "policy: enabled\ninjectedAnnotations:\n  example.com/injected: \"yes\"\n"},
}

func newInjector(t testing.TB, config, values string) *Injector {
	t.Helper()
	cfg, err := ParseConfig([]byte(config), []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestGoldenInjectedPods(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			in, pod := gc.setup(t)
			before := pod.DeepCopy()
			res, err := in.Inject(pod, "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, pod); d != "" {
				t.Fatalf("Inject changed its input:\n%s", d)
			}
			checkGolden(t, in, res, gc.name)
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got; -update to accept):\n%s", path, d)
	}
}

func TestPolicy(t *testing.T) {
	in := newInjector(t, "", "")
	disabled := newInjector(t, "policy: disabled\nalwaysInjectSelector:\n- matchLabels: {team: mesh}\n", "")
	never := newInjector(t, "policy: enabled\nneverInjectSelector:\n- matchExpressions: [{key: legacy, operator: Exists}]\n", "")
	for _, tc := range []struct {
		name    string
		in      *Injector
		ns      string
		edit    func(*corev1.Pod)
		inject  bool
		warning string
	}{
		{name: "policy enabled", in: in, inject: true},
		{name: "host network", in: in, edit: func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{name: "kube-system", in: in, ns: "kube-system"},
		{name: "already injected", in: in, edit: annotate("sidecar.istio.io/status", "{}")},
		{name: "annotation false", in: in, edit: annotate("sidecar.istio.io/inject", "false")},
		{name: "label false", in: in, edit: func(p *corev1.Pod) { p.Labels["sidecar.istio.io/inject"] = "false" }},
		{name: "label wins over annotation", in: in, edit: func(p *corev1.Pod) {
			p.Labels["sidecar.istio.io/inject"] = "false"
			annotate("sidecar.istio.io/inject", "true")(p)
		}, warning: "disagree"},
		{name: "garbage value", in: in, edit: annotate("sidecar.istio.io/inject", "maybe"), warning: "not true or false"},
		{name: "policy disabled", in: disabled},
		{name: "policy disabled, opt in", in: disabled, edit: annotate("sidecar.istio.io/inject", "true"), inject: true},
		{name: "policy disabled, always selector", in: disabled, edit: func(p *corev1.Pod) { p.Labels["team"] = "mesh" }, inject: true},
		{name: "never selector", in: never, edit: func(p *corev1.Pod) { p.Labels["legacy"] = "" }},
		{name: "never selector, opt in", in: never, edit: func(p *corev1.Pod) {
			p.Labels["legacy"] = ""
			p.Labels["sidecar.istio.io/inject"] = "true"
		}, inject: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod()
			if tc.edit != nil {
				tc.edit(pod)
			}
			res, err := tc.in.Inject(pod, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if res.Injected != tc.inject {
				t.Errorf("injected = %v (%s), want %v", res.Injected, res.Reason, tc.inject)
			}
			if !res.Injected && len(res.Pod.Spec.Containers) != len(pod.Spec.Containers) {
				t.Error("a skipped pod was changed")
			}
			if w := strings.Join(res.Warnings, "; "); !strings.Contains(w, tc.warning) || (tc.warning == "" && w != "") {
				t.Errorf("warnings %q, want %q", w, tc.warning)
			}
		})
	}
}

func TestBadAnnotationsRefused(t *testing.T) {
	in := newInjector(t, "", "")
	for _, tc := range []struct{ name, value string }{
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", "10.0.0.0/33"},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "not-a-cidr"},
		{"traffic.sidecar.istio.io/includeInboundPorts", "http"},
		{"traffic.sidecar.istio.io/excludeInboundPorts", "70000"},
		{"traffic.sidecar.istio.io/includeOutboundPorts", "9:1"},
		{"traffic.sidecar.istio.io/excludeOutboundPorts", "-1"},
		{"traffic.sidecar.istio.io/excludeInterfaces", "eth0 eth1"},
		{"istio.io/reroute-virtual-interfaces", "a/b"},
		{"sidecar.istio.io/interceptionMode", "MAGIC"},
		{"status.sidecar.istio.io/port", "x"},
		{"proxy.istio.io/config", "concurrency: [1"},
		{"proxy.istio.io/config", "noSuchField: 1"},
		{"sidecar.istio.io/proxyCPU", "lots"},
		{"sidecar.istio.io/rewriteAppHTTPProbers", "perhaps"},
		{"readiness.status.sidecar.istio.io/failureThreshold", "-3"},
		{"sidecar.istio.io/proxyImage", "a b"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			pod := appPod()
			annotate(tc.name, tc.value)(pod)
			res, err := in.Inject(pod, "")
			if err == nil {
				t.Fatalf("injected (%v), want an error", res.Injected)
			}
			var ae *AnnotationError
			if !errors.As(err, &ae) || ae.Annotation != tc.name {
				t.Fatalf("error %v does not name annotation %s", err, tc.name)
			}
			if !strings.Contains(err.Error(), tc.value) {
				t.Errorf("error %q does not show the value", err)
			}
		})
	}
}

// TestHostileAnnotationsStayData: pod-controlled strings never change the
// rendered YAML's structure.
func TestHostileAnnotationsStayData(t *testing.T) {
	in := newInjector(t, "", "")
	pod := appPod()
	hostile := "x\"\n    - name: EVIL\n      value: 1\n}{{ .Values }}"
	pod.Labels["app"] = hostile
	annotate("sidecar.istio.io/logLevel", hostile, "prometheus.io/scrape", "true", "prometheus.io/path", hostile)(pod)
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "EVIL" {
				t.Fatal("an annotation injected an env var")
			}
		}
	}
	if got := res.Pod.Labels["service.istio.io/canonical-name"]; got != hostile {
		t.Errorf("canonical-name = %q, want the app label verbatim", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, values, want string }{
		{"unknown config key", "polcy: enabled", "", "polcy"},
		{"bad policy", "policy: sometimes", "", "sometimes"},
		{"bad template", "templates:\n  sidecar: \"{{ .Nope \"", "", "injection template"},
		{"bad status port", "", "global: {proxy: {statusPort: 70000}}", "statusPort"},
		{"bad default config", "", "meshConfig: {defaultConfig: {bogus: 1}}", "defaultConfig"},
		{"bad selector", "neverInjectSelector:\n- matchExpressions: [{key: a, operator: Bad}]", "", "neverInjectSelector"},
		{"other template", "defaultTemplates: [gateway]", "", "gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.config), []byte(tc.values))
			if err == nil {
				_, err = New(cfg, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestTemplateMistakesFailWhole: a template that renders bad YAML or
// unknown fields fails the injection with the reason; nothing is half done.
func TestTemplateMistakesFailWhole(t *testing.T) {
	for _, tmpl := range []string{
		"spec:\n  containers:\n  - name: istio-proxy\n    imagee: x\n",
		"spec: [\n",
		"metadata:\n  labels: {{ .Values.global.nosuchkey }}\n",
	} {
		cfg, err := ParseConfig([]byte("templates:\n  sidecar: "+quoteYAML(tmpl)), nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := in.Inject(appPod(), ""); err == nil {
			t.Errorf("template %q: injected=%v, want an error", tmpl, res.Injected)
		}
	}
}

// quoteYAML quotes s as a YAML (JSON) string.
func quoteYAML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
