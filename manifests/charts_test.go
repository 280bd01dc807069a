package manifests_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/manifests"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const namespace = "istio-system"

// render renders a chart directory with the helm library, as `helm
// template` does, and returns its objects in install order.
func render(t testing.TB, chart string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	return renderRelease(t, chart, values, chartutil.ReleaseOptions{Name: chart, Namespace: namespace, IsInstall: true, Revision: 1})
}

// renderRelease is render for a release of its own (an upgrade).
func renderRelease(t testing.TB, chart string, values map[string]any, rel chartutil.ReleaseOptions) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("charts", chart))
	if err != nil {
		t.Fatalf("load chart %s: %v", chart, err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, rel, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render chart %s: %v", chart, err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, n := range names {
		if strings.HasSuffix(n, ".tpl") || strings.HasSuffix(n, "NOTES.txt") {
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(files[n])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", n, err, doc)
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	order := map[string]int{"CustomResourceDefinition": 0, "Namespace": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3, "ConfigMap": 4}
	rank := func(k string) int {
		if r, ok := order[k]; ok {
			return r
		}
		return 9
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i].GetKind()) < rank(objs[j].GetKind()) })
	return objs
}

func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			b, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(b, into); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("chart renders no %s %s", kind, name)
}

// TestCRDsAreIstios: the base chart's CRDs are istio.io/api's published file, unchanged.
func TestCRDsAreIstios(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/api").Output()
	if err != nil {
		t.Fatalf("locate istio.io/api: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "kubernetes", "customresourcedefinitions.gen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifests.ReadFile(manifests.CRDsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from istio.io/api's kubernetes/customresourcedefinitions.gen.yaml: copy it again", manifests.CRDsPath)
	}
	n := 0
	for _, o := range render(t, "base", nil) {
		if o.GetKind() == "CustomResourceDefinition" {
			n++
		}
	}
	if n < 14 {
		t.Errorf("base chart renders %d CRDs", n)
	}
}

func samplePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"traffic.sidecar.istio.io/excludeOutboundPorts": "5432"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

// TestInjectorConfigMapMatchesDefaults: the injector the chart installs
// (its ConfigMap) injects exactly what kube-inject's defaults inject.
func TestInjectorConfigMapMatchesDefaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"defaults", nil},
		{"cni and revision", map[string]any{"istio_cni": map[string]any{"enabled": true}, "revision": "canary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "istiod", tc.values)
			var cm corev1.ConfigMap
			name := "istio-sidecar-injector"
			if tc.values["revision"] != nil {
				name += "-canary"
			}
			find(t, objs, "ConfigMap", name, &cm)
			cfg, err := inject.ParseConfig([]byte(cm.Data["config"]), []byte(cm.Data["values"]))
			if err != nil {
				t.Fatalf("the chart's injector config does not load: %v", err)
			}
			fromChart, err := inject.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			vals, _ := yaml.Marshal(tc.values)
			def, err := inject.ParseConfig(nil, vals)
			if err != nil {
				t.Fatal(err)
			}
			fromDefaults, err := inject.New(def, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := fromChart.Inject(samplePod(), "")
			if err != nil {
				t.Fatal(err)
			}
			b, err := fromDefaults.Inject(samplePod(), "")
			if err != nil {
				t.Fatal(err)
			}
			if !a.Injected {
				t.Fatalf("chart injector did not inject: %s", a.Reason)
			}
			if d := cmp.Diff(b.Pod, a.Pod); d != "" {
				t.Errorf("chart injector differs from the defaults (-defaults +chart):\n%s", d)
			}
		})
	}
}

// TestWebhookConfigurationsMatchGo: the chart's webhook configurations are
// the ones webhook.MutatingConfiguration and ValidatingConfiguration build.
func TestWebhookConfigurationsMatchGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts webhook.ConfigurationOptions
	}{
		{"default", webhook.ConfigurationOptions{URL: "https://127.0.0.1:15017", CABundle: []byte("root")}},
		{"service", webhook.ConfigurationOptions{CABundle: []byte("root")}},
		{"canary", webhook.ConfigurationOptions{Revision: "canary", CABundle: []byte("root")}},
		{"by default", webhook.ConfigurationOptions{EnableNamespacesByDefault: true, CABundle: []byte("root")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{
				"revision":               tc.opts.Revision,
				"webhooks":               map[string]any{"url": tc.opts.URL, "caBundle": "cm9vdA=="}, // base64("root")
				"sidecarInjectorWebhook": map[string]any{"enableNamespacesByDefault": tc.opts.EnableNamespacesByDefault},
			}
			objs := render(t, "istiod", values)
			var mw admissionregv1.MutatingWebhookConfiguration
			find(t, objs, "MutatingWebhookConfiguration", "", &mw)
			want := webhook.MutatingConfiguration(tc.opts)
			if mw.Name != want.Name {
				t.Errorf("name %s, want %s", mw.Name, want.Name)
			}
			if d := cmp.Diff(want.Webhooks, mw.Webhooks); d != "" {
				t.Errorf("mutating webhooks differ (-go +chart):\n%s", d)
			}
			var vw admissionregv1.ValidatingWebhookConfiguration
			find(t, objs, "ValidatingWebhookConfiguration", "", &vw)
			wantV := webhook.ValidatingConfiguration(tc.opts)
			if vw.Name != wantV.Name {
				t.Errorf("name %s, want %s", vw.Name, wantV.Name)
			}
			if d := cmp.Diff(wantV.Webhooks, vw.Webhooks); d != "" {
				t.Errorf("validating webhooks differ (-go +chart):\n%s", d)
			}
		})
	}
}

// TestCommandLinesParse: the istiod Deployment's args are istiod's flags,
// the istio-cni DaemonSet's args are install-cni's.
func TestCommandLinesParse(t *testing.T) {
	var d appsv1.Deployment
	find(t, render(t, "istiod", nil), "Deployment", "istiod", &d)
	c := d.Spec.Template.Spec.Containers[0]
	if _, err := istiod.ParseFlags(c.Args, func(k string) string {
		if k == "KUBERNETES_SERVICE_HOST" {
			return "10.0.0.1"
		}
		return ""
	}, io.Discard); err != nil {
		t.Errorf("istiod refuses the chart's args %q: %v", c.Args, err)
	}
	var ports []int32
	for _, p := range c.Ports {
		ports = append(ports, p.ContainerPort)
	}
	if !cmp.Equal(ports, []int32{15010, 15012, 15014, 15017, 8080}) {
		t.Errorf("istiod ports %v", ports)
	}

	var ds appsv1.DaemonSet
	find(t, render(t, "istio-cni", nil), "DaemonSet", "istio-cni-node", &ds)
	bin := filepath.Join(t.TempDir(), "install-cni")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/skiff-mesh/skiff/cmd/install-cni").CombinedOutput(); err != nil {
		t.Fatalf("build install-cni: %v\n%s", err, out)
	}
	args := ds.Spec.Template.Spec.Containers[0].Args
	// -h after the chart's flags: exit 0 only if every flag before it is known.
	if out, err := exec.Command(bin, append(args, "-h")...).CombinedOutput(); err != nil {
		t.Errorf("install-cni refuses the chart's args %q: %v\n%s", args, err, out)
	}
}

// TestChartsApplyToAPIServer renders the three charts and applies every
// object to a real kube-apiserver: the CRDs for real, the rest as a
// server-side dry run (full validation and admission, nothing stored).
func TestChartsApplyToAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, chart := range []string{"base", "istiod", "istio-cni"} {
		for _, o := range render(t, chart, nil) {
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %s %s: %v", chart, gvk.Kind, o.GetName(), err)
				continue
			}
			ri := dyn.Resource(m.Resource)
			var res dynamic.ResourceInterface = ri
			if m.Scope.Name() == "namespace" {
				if o.GetNamespace() == "" {
					o.SetNamespace(namespace)
				}
				res = ri.Namespace(o.GetNamespace())
			}
			opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
			if gvk.Kind == "CustomResourceDefinition" {
				opts.DryRun = nil
			}
			if _, err := res.Create(ctx, o, opts); err != nil {
				t.Errorf("%s: %s %s refused: %v", chart, gvk.Kind, o.GetName(), err)
			}
		}
	}
}

// TestWebhookConfigurationsForPatching: the webhook configurations carry
// what istiod's webhook.ConfigurationPatcher selects on (istio.io/rev) and
// no caBundle unless one is given; validation starts failing open on
// install, as Istio's chart, and istiod switches it to Fail.
func TestWebhookConfigurationsForPatching(t *testing.T) {
	install := chartutil.ReleaseOptions{Name: "istiod", Namespace: namespace, IsInstall: true, Revision: 1}
	upgrade := chartutil.ReleaseOptions{Name: "istiod", Namespace: namespace, IsUpgrade: true, Revision: 2}
	for _, tc := range []struct {
		name   string
		values map[string]any
		rel    chartutil.ReleaseOptions
		rev    string
		policy string // "" when the chart leaves failurePolicy out
		ca     bool
	}{
		{name: "install", rel: install, rev: "default", policy: "Ignore"},
		{name: "upgrade", rel: upgrade, rev: "default", policy: ""},
		{name: "canary", values: map[string]any{"revision": "canary"}, rel: install, rev: "canary", policy: "Ignore"},
		{name: "policy given", values: map[string]any{"pilot": map[string]any{"validationFailurePolicy": "Fail"}}, rel: install, rev: "default", policy: "Fail"},
		{name: "caBundle given", values: map[string]any{"webhooks": map[string]any{"caBundle": "cm9vdA=="}}, rel: install, rev: "default", policy: "Fail", ca: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderRelease(t, "istiod", tc.values, tc.rel)
			var mw admissionregv1.MutatingWebhookConfiguration
			find(t, objs, "MutatingWebhookConfiguration", "", &mw)
			var vw admissionregv1.ValidatingWebhookConfiguration
			find(t, objs, "ValidatingWebhookConfiguration", "", &vw)
			suffix := ""
			if tc.rev != "default" {
				suffix = "-" + tc.rev
			}
			if want := "istio-validator" + suffix + "-" + namespace; vw.Name != want {
				t.Errorf("validating configuration %q, want %q", vw.Name, want)
			}
			for _, l := range []map[string]string{mw.Labels, vw.Labels} {
				if l[webhook.LabelRevision] != tc.rev {
					t.Errorf("labels %v, want istio.io/rev=%s", l, tc.rev)
				}
			}
			for _, wh := range mw.Webhooks {
				if !strings.HasSuffix(wh.Name, webhook.InjectionWebhookSuffix) {
					t.Errorf("injection webhook %s: the patcher only patches names ending in %s", wh.Name, webhook.InjectionWebhookSuffix)
				}
				if (len(wh.ClientConfig.CABundle) > 0) != tc.ca {
					t.Errorf("injection webhook %s: caBundle %q", wh.Name, wh.ClientConfig.CABundle)
				}
			}
			for _, wh := range vw.Webhooks {
				if (len(wh.ClientConfig.CABundle) > 0) != tc.ca {
					t.Errorf("validation webhook %s: caBundle %q", wh.Name, wh.ClientConfig.CABundle)
				}
				got := ""
				if wh.FailurePolicy != nil {
					got = string(*wh.FailurePolicy)
				}
				if got != tc.policy {
					t.Errorf("validation webhook %s: failurePolicy %q, want %q", wh.Name, got, tc.policy)
				}
				if s := wh.ClientConfig.Service; s == nil || s.Name != "istiod"+suffix || s.Port == nil || *s.Port != 443 || s.Path == nil || *s.Path != "/validate" {
					t.Errorf("validation webhook %s: service %+v, want istiod%s:443/validate", wh.Name, s, suffix)
				}
			}
			var svc corev1.Service
			find(t, objs, "Service", "istiod"+suffix, &svc)
			ports := map[int32]int{}
			for _, p := range svc.Spec.Ports {
				ports[p.Port] = p.TargetPort.IntValue()
			}
			for port, target := range map[int32]int{15010: 0, 15012: 0, 443: 15017, 15014: 0} {
				if got, ok := ports[port]; !ok || got != target {
					t.Errorf("service port %d: target %d (present %v), want %d", port, got, ok, target)
				}
			}
		})
	}
}

// TestRBACAllowsPatching: istiod's ClusterRole lets it watch and patch the
// webhook configurations.
func TestRBACAllowsPatching(t *testing.T) {
	var cr rbacv1.ClusterRole
	find(t, render(t, "istiod", nil), "ClusterRole", "istiod-"+namespace, &cr)
	for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		for _, verb := range []string{"get", "list", "watch", "update", "patch"} {
			ok := false
			for _, r := range cr.Rules {
				ok = ok || (slices.Contains(r.APIGroups, "admissionregistration.k8s.io") && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb))
			}
			if !ok {
				t.Errorf("ClusterRole %s: no %s on %s", cr.Name, verb, res)
			}
		}
	}
}

// staticRoots is a RootSource that never changes.
type staticRoots []byte

func (r staticRoots) RootCertPEM() []byte      { return r }
func (r staticRoots) Changed() <-chan struct{} { return nil }

// TestChartRBACLetsIstiodPatch: with the chart's ServiceAccount, roles and
// webhook configurations in a real kube-apiserver, istiod's patcher
// running as that ServiceAccount watches and patches the configurations,
// and its readiness probe may dry-run its invalid VirtualService (not
// forbidden: with nothing serving the webhook, failing open, it is let in).
func TestChartRBACLetsIstiodPatch(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(objs []*unstructured.Unstructured, kinds ...string) {
		t.Helper()
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		for _, o := range objs {
			if !slices.Contains(kinds, o.GetKind()) {
				continue
			}
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
			}
			var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == "namespace" {
				if o.GetNamespace() == "" {
					o.SetNamespace(namespace)
				}
				res = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			}
			if _, err := res.Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s %s: %v", gvk.Kind, o.GetName(), err)
			}
		}
	}
	apply(render(t, "base", nil), "CustomResourceDefinition")
	apply(render(t, "istiod", nil), "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":istiod",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	client, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := istioclient.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := authority.RootCertPEM()
	ready := webhook.DryRunReady(ic.NetworkingV1().RESTClient(), namespace, "default")
	p, err := webhook.NewConfigurationPatcher(webhook.PatcherOptions{Client: client.AdmissionregistrationV1().RESTClient(), Roots: staticRoots(root), Ready: ready})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	adm := env.Client.AdmissionregistrationV1()
	polltest.Until(t, "caBundle patched by istiod's ServiceAccount", func() bool {
		mw, err := adm.MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vw, err := adm.ValidatingWebhookConfigurations().Get(ctx, "istio-validator-"+namespace, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range mw.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, root) {
				return false
			}
		}
		return bytes.Equal(vw.Webhooks[0].ClientConfig.CABundle, root)
	})
	vw, err := adm.ValidatingWebhookConfigurations().Get(ctx, "istio-validator-"+namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *vw.Webhooks[0].FailurePolicy; got != admissionregv1.Ignore {
		t.Errorf("failurePolicy %s with nothing serving the webhook, want Ignore", got)
	}
	var last error
	if !polltest.Wait(polltest.Timeout, func() bool {
		last = ready(ctx, vw)
		return last != nil && strings.Contains(last.Error(), "not refused")
	}) {
		t.Errorf("readiness probe as istiod: %v, want the invalid VirtualService let in (failing open), not refused", last)
	}
}
