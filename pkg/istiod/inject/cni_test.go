package inject

import (
	"encoding/json"
	"io"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-mesh/skiff/pkg/capture"
	"github.com/skiff-mesh/skiff/pkg/cni"
	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// TestCNIPluginAgreesWithValidation: with the CNI plugin, the pod's capture
// is programmed by the plugin from the injected pod's annotations, and
// istio-validation only checks it. Both must mean the same policy.
func TestCNIPluginAgreesWithValidation(t *testing.T) {
	in := newInjector(t, "", "istio_cni: {enabled: true}")
	for _, gc := range goldenCases {
		if gc.values != "" || gc.config != "" || gc.name == "interception-none" || gc.name == "hold-dns-proxyconfig" {
			continue // other values; no capture; DNS is captured differently by design
		}
		t.Run(gc.name, func(t *testing.T) {
			pod := appPod()
			if gc.edit != nil {
				gc.edit(pod)
			}
			pluginAgrees(t, in, pod)
		})
	}
}

// TestCNIPluginReadsClusterValues: in CNI mode the values' capture settings
// reach the plugin through the pod's annotations, so a cluster-wide
// setting is honoured by the plugin as istio-validation checks it.
func TestCNIPluginReadsClusterValues(t *testing.T) {
	for _, values := range []string{
		"pilot: {cni: {enabled: true}}, global: {proxy: {excludeIPRanges: 10.96.0.0/12, includeInboundPorts: '9080', excludeOutboundPorts: '3306'}}",
		"pilot: {cni: {enabled: true}}, global: {proxy: {includeIPRanges: 10.0.0.0/8, excludeInboundPorts: '9090', includeOutboundPorts: '443'}}",
	} {
		t.Run(values, func(t *testing.T) {
			pluginAgrees(t, newInjector(t, "", "{"+values+"}"), appPod())
		})
	}
}

// pluginAgrees injects pod and checks that the CNI plugin's capture policy
// for the result is the one istio-validation's flags describe.
func pluginAgrees(t *testing.T, in *Injector, pod *corev1.Pod) {
	t.Helper()
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	var cp cni.Pod
	if err := json.Unmarshal(js, &cp); err != nil {
		t.Fatal(err)
	}
	d, err := cni.Decide(&cp)
	if err != nil {
		t.Fatalf("the CNI plugin refuses the injected pod: %v", err)
	}
	if !d.Redirect {
		t.Fatalf("the CNI plugin would not capture: %s", d.Reason)
	}
	init := container(res.Pod.Spec.InitContainers, "istio-validation")
	if init == nil {
		t.Fatal("no istio-validation")
	}
	v, err := capture.Parse(init.Args[1:], capture.Environment{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sorted := func(p []ipt.PortRange) []ipt.PortRange {
		p = slices.Clone(p)
		slices.SortFunc(p, func(a, b ipt.PortRange) int { return int(a.Lo) - int(b.Lo) })
		return p
	}
	got, want := d.Capture, v
	// Without the annotation Istio's plugin keeps outbound 15020 out of
	// capture, where istio-validation's flags name no port; Skiff's plugin
	// does as Istio's (pkg/cni TestSameRulesAsIstiosPlugin).
	wantOutExcluded := want.OutboundExcludePorts
	if _, ok := res.Pod.Annotations[cni.AnnotationExcludeOutbound]; !ok {
		wantOutExcluded = append(slices.Clone(wantOutExcluded), ipt.Port(15020))
	}
	for _, c := range []struct {
		name string
		a, b any
	}{
		{"mode", want.InboundMode, got.InboundMode},
		{"inbound ports", want.InboundPorts, got.InboundPorts},
		{"inbound excluded", sorted(want.InboundExcludePorts), sorted(got.InboundExcludePorts)},
		{"outbound CIDRs", want.OutboundCIDRs, got.OutboundCIDRs},
		{"outbound excluded CIDRs", want.OutboundExcludeCIDR, got.OutboundExcludeCIDR},
		{"outbound ports", want.OutboundPorts, got.OutboundPorts},
		{"outbound excluded ports", wantOutExcluded, got.OutboundExcludePorts},
		{"excluded interfaces", want.ExcludeInterfaces, got.ExcludeInterfaces},
		{"virtual interfaces", want.VirtualInterfaces, got.VirtualInterfaces},
		// With TPROXY the proxy runs as uid 0 and gid 1337: the plugin
		// exempts uid 0 (the proxy's runAsUser, as Istio's plugin), the init
		// flags uid 1337; gid 1337 exempts the proxy either way.
		{"gids", want.ProxyGIDs, got.ProxyGIDs},
	} {
		// With status.sidecar.istio.io/port the template's flags exclude
		// the annotated port where the plugin's list is built its own way
		// (docs/cni-plugin.md); not compared.
		if c.name == "inbound excluded" && res.Pod.Annotations["status.sidecar.istio.io/port"] != "" {
			continue
		}
		if d := cmp.Diff(c.a, c.b, cmp.Comparer(func(a, b ipt.PortRange) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
			t.Errorf("%s: istio-validation (-) and the CNI plugin (+) differ:\n%s", c.name, d)
		}
	}
}

// TestMultusNetwork: with pilot.cni.provider multus the pod joins the
// istio-cni network, added to the networks it already names.
func TestMultusNetwork(t *testing.T) {
	in := newInjector(t, "", "pilot: {cni: {enabled: true, provider: multus}}")
	for _, tc := range []struct{ own, want string }{
		{"", "default/istio-cni"},
		{"net1", "net1, default/istio-cni"},
		{"net1, default/istio-cni", "net1, default/istio-cni"},
		// As Istio's appendMultusNetwork: a JSON list gets an object
		// spliced in before its "]"; without "]" the value is a list of names.
		{`[{"name":"net1"}]`, `[{"name":"net1"}, {"name": "istio-cni", "namespace": "default"}]`},
		{`[{"name":"istio-cni","namespace":"default"}]`, `[{"name":"istio-cni","namespace":"default"}]`},
		{`[{"name":]`, `[{"name":]`},
		{`[{"name":`, `[{"name":, default/istio-cni`},
	} {
		t.Run(tc.own, func(t *testing.T) {
			pod := appPod()
			if tc.own != "" {
				annotate("k8s.v1.cni.cncf.io/networks", tc.own)(pod)
			}
			res, err := in.Inject(pod, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Pod.Annotations["k8s.v1.cni.cncf.io/networks"]; got != tc.want {
				t.Errorf("networks %q, want %q", got, tc.want)
			}
		})
	}
	res, err := newInjector(t, "", "pilot: {cni: {enabled: true}}").Inject(appPod(), "")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := res.Pod.Annotations["k8s.v1.cni.cncf.io/networks"]; ok {
		t.Errorf("default provider: networks %q, want none", v)
	}
}
