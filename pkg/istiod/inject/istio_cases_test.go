package inject_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
)

// istioCase is a case of Istio's injector test (pkg/kube/inject
// TestInjection): an input of its test data, the injected output it
// expects, and the settings it injects with.
type istioCase struct {
	in, want string
	// sets are istioctl --set flags, iop an IstioOperator file of the test data.
	sets []string
	iop  string
	// mesh changes Istio's mesh config (the istio ConfigMap's).
	mesh func(m map[string]any)
	// legacy turns native sidecars off (Istio's ENABLE_NATIVE_SIDECARS=false
	// or old nodes); Istio's test otherwise sees nodes that support them.
	legacy     bool
	compliance string
	// wantErr is a substring of the error, lowercased, for inputs Istio
	// refuses (Istio's message names the setting, includeipranges;
	// Skiff's names the annotation, traffic.sidecar.istio.io/includeOutboundIPRanges:
	// either is accepted, see errorNames).
	wantErr string
}

func defaultConfig(m map[string]any) map[string]any {
	dc, _ := m["defaultConfig"].(map[string]any)
	if dc == nil {
		dc = map[string]any{}
		m["defaultConfig"] = dc
	}
	return dc
}

// istioCases are the cases Istio's table sets up; every other input of
// the test data is a case with default settings and INPUT.injected.
var istioCases = []istioCase{
	{in: "hello.yaml", want: "hello.yaml.cni.injected", sets: []string{"components.cni.enabled=true", "values.cni.provider=default", "values.global.network=network1"}},
	{in: "hello.yaml", want: "hello.yaml.proxyImageName.injected", sets: []string{"values.global.proxy.image=proxyTest"}},
	{in: "hello.yaml", want: "hello.yaml.proxyInitImageName.injected", sets: []string{"values.global.proxy_init.image=proxyInitTest"}},
	{in: "hello.yaml", want: "hello-tproxy.yaml.injected", mesh: func(m map[string]any) { defaultConfig(m)["interceptionMode"] = "TPROXY" }},
	{in: "hello.yaml", want: "hello-always.yaml.injected", sets: []string{"values.global.imagePullPolicy=Always"}},
	{in: "hello.yaml", want: "hello-never.yaml.injected", sets: []string{"values.global.imagePullPolicy=Never"}},
	{in: "hello.yaml", want: "hello-old-version.yaml.injected", legacy: true},
	{in: "format-duration.yaml", want: "format-duration.yaml.injected", mesh: func(m map[string]any) { defaultConfig(m)["drainDuration"] = "23s" }},
	{in: "traffic-params.yaml", want: "traffic-params.yaml.injected", sets: []string{
		"values.global.proxy.includeIPRanges=127.0.0.1/24,10.96.0.1/24", "values.global.proxy.excludeIPRanges=10.96.0.2/24,10.96.0.3/24",
		"values.global.proxy.excludeInboundPorts=4,5,6", "values.global.proxy.statusPort=0"}},
	{in: "status_params.yaml", want: "status_params.yaml.injected", sets: statusSets},
	{in: "kubevirtInterfaces.yaml", want: "kubevirtInterfaces.yaml.injected", sets: statusSets},
	{in: "reroute-virtual-interfaces.yaml", want: "reroute-virtual-interfaces.yaml.injected", sets: statusSets},
	{in: "hello.yaml", want: "hello-image-secrets-in-values.yaml.injected", iop: "hello-image-secrets-in-values.iop.yaml"},
	{in: "hello-image-pull-secret.yaml", want: "hello-multiple-image-secrets.yaml.injected", iop: "hello-image-secrets-in-values.iop.yaml"},
	{in: "hello.yaml", want: "hello-template-in-values.yaml.injected", iop: "hello-template-in-values.iop.yaml"},
	{in: "hello.yaml", want: "hello-mount-mtls-certs.yaml.injected", sets: []string{"values.global.mountMtlsCerts=true"}},
	{in: "hello.yaml", want: "hello-cncf-networks.yaml.injected", sets: multus},
	{in: "hello-existing-cncf-networks.yaml", want: "hello-existing-cncf-networks.yaml.injected", sets: multus},
	{in: "hello-existing-cncf-networks-json.yaml", want: "hello-existing-cncf-networks-json.yaml.injected", sets: multus},
	{in: "hello.yaml", want: "hello.proxyHoldsApplication.yaml.injected", sets: hold},
	{in: "hello-probes.yaml", want: "hello-probes.proxyHoldsApplication.yaml.injected", sets: hold},
	{in: "hello-probes-noProxyHoldApplication-ProxyConfig.yaml", want: "hello-probes-noProxyHoldApplication-ProxyConfig.yaml.injected", sets: hold},
	{in: "cronjob.yaml", want: "cronjob-old-version.yaml.injected", legacy: true},
	{in: "daemonset.yaml", want: "daemonset-old-version.yaml.injected", legacy: true},
	{in: "job.yaml", want: "job-old-version.yaml.injected", legacy: true},
	{in: "pod.yaml", want: "pod-old-version.yaml.injected", legacy: true},
	{in: "replicaset.yaml", want: "replicaset-old-version.yaml.injected", legacy: true},
	{in: "statefulset.yaml", want: "statefulset-old-version.yaml.injected", legacy: true},
	{in: "traffic-annotations-bad-includeipranges.yaml", wantErr: "includeipranges"},
	{in: "traffic-annotations-bad-excludeipranges.yaml", wantErr: "excludeipranges"},
	{in: "traffic-annotations-bad-includeinboundports.yaml", wantErr: "includeinboundports"},
	{in: "traffic-annotations-bad-excludeinboundports.yaml", wantErr: "excludeinboundports"},
	{in: "traffic-annotations-bad-excludeoutboundports.yaml", wantErr: "excludeoutboundports"},
	{in: "traffic-annotations.yaml", want: "traffic-annotations.yaml.injected", mesh: func(m map[string]any) {
		dc := defaultConfig(m)
		md, _ := dc["proxyMetadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			dc["proxyMetadata"] = md
		}
		md["ISTIO_META_TLS_CLIENT_KEY"] = "/etc/identity/client/keys/client-key.pem"
	}},
	{in: "proxy-override-runas.yaml", want: "proxy-override-runas.yaml.cni.injected", sets: []string{"components.cni.enabled=true"}},
	{in: "proxy-override-runas.yaml", want: "proxy-override-runas.yaml.tproxy.injected", mesh: func(m map[string]any) { defaultConfig(m)["interceptionMode"] = "TPROXY" }},
	{in: "proxy-override-args.yaml", want: "proxy-override-args-native.yaml.injected"},
	{in: "native-sidecar.yaml", want: "native-sidecar-old-version.yaml.injected", legacy: true},
	{in: "native-sidecar-opt-in.yaml", want: "native-sidecar-opt-in.yaml.injected", legacy: true},
	{in: "native-sidecar-opt-out.yaml", want: "native-sidecar-opt-out.yaml.injected", legacy: true},
	{in: "custom-template.yaml", want: "custom-template.yaml.injected", iop: "custom-template.iop.yaml"},
	{in: "merge-probers.yaml", want: "merge-probers.yaml.injected", sets: hold},
	{in: "hello-tracing-disabled.yaml", want: "hello-tracing-disabled.yaml.injected", mesh: func(m map[string]any) { defaultConfig(m)["tracing"] = map[string]any{} }},
	{in: "hello-openshift.yaml", want: "hello-openshift.yaml.injected", sets: []string{"components.cni.enabled=true"}},
	{in: "hello-openshift-custom-injection.yaml", want: "hello-openshift-custom-injection.yaml.injected", sets: []string{"components.cni.enabled=true"}},
	{in: "hello-openshift-tproxy.yaml", want: "hello-openshift-tproxy.yaml.injected", sets: []string{"components.cni.enabled=true"}},
	{in: "hello-probes-localhost.yaml", want: "hello-probes-localhost.yaml.injected", mesh: func(m map[string]any) {
		m["inboundTrafficPolicy"] = map[string]any{"mode": "LOCALHOST"}
	}},
	{in: "proxy-resources-null.yaml", want: "proxy-resources-null.yaml.injected", iop: "proxy-resources-null.iop.yaml"},
	{in: "proxy-resources-null-no-init.yaml", want: "proxy-resources-null-no-init.yaml.injected", iop: "proxy-resources-null.iop.yaml"},
	{in: "proxy-resources-zero.yaml", want: "proxy-resources-zero.yaml.injected", iop: "proxy-resources-zero.iop.yaml"},
	{in: "proxy-resources-memory-null.yaml", want: "proxy-resources-memory-null.yaml.injected", iop: "proxy-resources-memory-null.iop.yaml"},
	{in: "proxy-resources-mixed-null.yaml", want: "proxy-resources-mixed-null.yaml.injected", iop: "proxy-resources-mixed-null.iop.yaml"},
	{in: "sidecar-spire.yaml", want: "sidecar-spire.yaml.injected", iop: "spire-template.iop.yaml"},
	{in: "gateway-spire.yaml", want: "gateway-spire.yaml.injected", iop: "spire-template.iop.yaml"},
	{in: "hello-otel-semconv.yaml", want: "hello-otel-semconv.yaml.injected", mesh: func(m map[string]any) {
		eps, _ := m["extensionProviders"].([]any)
		m["extensionProviders"] = append(eps, map[string]any{"name": "otel", "opentelemetry": map[string]any{
			"service": "otel-collector.observability.svc.cluster.local", "port": 4317,
			"serviceAttributeEnrichment": "OTEL_SEMANTIC_CONVENTIONS"}})
	}},
	{in: "hello.yaml", want: "hello-fips-140-3.yaml.injected", compliance: "fips-140-3"},
}

var (
	statusSets = []string{"values.global.proxy.statusPort=123", "values.global.proxy.readinessInitialDelaySeconds=100",
		"values.global.proxy.readinessPeriodSeconds=200", "values.global.proxy.readinessFailureThreshold=300"}
	multus = []string{"components.cni.enabled=true", "values.cni.provider=multus"}
	hold   = []string{"values.global.proxy.holdApplicationUntilProxyStarts=true"}
)

// allIstioCases is istioCases with the test data's other inputs added.
func allIstioCases(t *testing.T, dir string) []istioCase {
	t.Helper()
	cases := append([]istioCase{}, istioCases...)
	have := map[string]bool{}
	for _, c := range cases {
		have[c.want] = true
		if c.want == "" {
			have[c.in+".injected"] = true
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".iop.yaml") || have[n+".injected"] {
			continue
		}
		cases = append(cases, istioCase{in: n, want: n + ".injected"})
	}
	return cases
}

var renders sync.Map // cache key → istioInstall

// install renders Istio's chart for c's settings (once per settings).
func (c istioCase) install(t *testing.T, dir string) istioInstall {
	t.Helper()
	key := strings.Join(c.sets, "\x00") + "\x01" + c.iop
	if v, ok := renders.Load(key); ok {
		return v.(istioInstall)
	}
	iop := ""
	if c.iop != "" {
		iop = filepath.Join(dir, c.iop)
	}
	got := renderIstioChart(t, istioValues(t, c.sets, iop))
	renders.Store(key, got)
	return got
}

// injector builds Skiff's injector from Istio's ConfigMaps as the chart
// renders them for c, the mesh config given as the values' meshConfig.
func (c istioCase) injector(t *testing.T, dir string) *inject.Injector {
	t.Helper()
	inst := c.install(t, dir)
	var vals map[string]any
	if err := json.Unmarshal(inst.Values, &vals); err != nil {
		t.Fatalf("Istio's injector values: %v", err)
	}
	var mesh map[string]any
	b, _ := json.Marshal(inst.Mesh)
	_ = json.Unmarshal(b, &mesh)
	if c.mesh != nil {
		c.mesh(mesh)
	}
	vals["meshConfig"] = mesh
	vb, _ := json.Marshal(vals)
	cfg, err := inject.ParseConfig(inst.Config, vb)
	if err != nil {
		t.Fatalf("Istio's istio-sidecar-injector ConfigMap: %v", err)
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatalf("Istio's istio-sidecar-injector ConfigMap: %v", err)
	}
	in.SetNamespaces(istioNamespaces)
	in.SetNativeSidecars(!c.legacy)
	in.SetCompliancePolicy(c.compliance)
	return in
}

// istioNamespaces are the namespaces of Istio's test: test-ns carries
// OpenShift's id ranges.
func istioNamespaces(ns string) (map[string]string, bool) {
	if ns != "test-ns" {
		return nil, false
	}
	return map[string]string{
		"openshift.io/sa.scc.uid-range":           "1000620000/10000",
		"openshift.io/sa.scc.supplemental-groups": "1000620000/10000",
	}, true
}

// run injects every pod of c's input and returns the differences from
// Istio's expected output, each prefixed by the pod's index when the
// input has more than one.
func (c istioCase) run(t *testing.T, dir string) ([]difference, error) {
	t.Helper()
	return c.inject(t, dir, c.injector(t, dir))
}

// inject is run with injector in.
func (c istioCase) inject(t *testing.T, dir string, in *inject.Injector) ([]difference, error) {
	t.Helper()
	pods := podsFrom(t, filepath.Join(dir, c.in))
	if c.want == "" {
		for _, p := range pods {
			if _, err := in.Inject(p, p.Namespace); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	wants := podsFrom(t, filepath.Join(dir, c.want))
	if len(pods) != len(wants) {
		t.Fatalf("%s has %d pods, %s %d", c.in, len(pods), c.want, len(wants))
	}
	var out []difference
	for i, p := range pods {
		res, err := in.Inject(p, p.Namespace)
		if err != nil {
			return nil, err
		}
		for _, d := range diffPaths(normalPod(t, res.Pod), normalPod(t, wants[i])) {
			if len(pods) > 1 {
				d.path = fmt.Sprintf("<%d>%s", i, d.path)
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}
