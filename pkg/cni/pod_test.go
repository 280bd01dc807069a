package cni

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/capture"
	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

func injectedPod(annotations map[string]string, mutate ...func(*Pod)) *Pod {
	p := &Pod{}
	p.Metadata.Name, p.Metadata.Namespace = "reviews-v1", "default"
	p.Metadata.Annotations = map[string]string{AnnotationStatus: `{"containers":["istio-proxy"]}`}
	for k, v := range annotations {
		p.Metadata.Annotations[k] = v
	}
	p.Spec.InitContainers = []Container{{Name: "istio-validation"}}
	p.Spec.Containers = []Container{{Name: "app"}, {Name: ProxyContainer, Args: []string{"proxy", "sidecar"}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func proxy(p *Pod) *Container { return &p.Spec.Containers[1] }

func TestDecideSkips(t *testing.T) {
	tests := []struct {
		name   string
		pod    *Pod
		reason string
	}{
		{"istio-init", injectedPod(nil, func(p *Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, Container{Name: InitContainer}) }), "istio-init"},
		{"no proxy", injectedPod(nil, func(p *Pod) { p.Spec.Containers = p.Spec.Containers[:1] }), "no istio-proxy"},
		{"disable envoy", injectedPod(nil, func(p *Pod) { proxy(p).Env = []EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}} }), "DISABLE_ENVOY"},
		{"router", injectedPod(nil, func(p *Pod) { proxy(p).Args = []string{"proxy", "router"} }), `"router"`},
		{"label off", injectedPod(nil, func(p *Pod) { p.Metadata.Labels = map[string]string{AnnotationInject: "false"} }), "inject is false"},
		{"annotation off", injectedPod(map[string]string{AnnotationInject: "false"}), "inject is false"},
		{"not injected", injectedPod(nil, func(p *Pod) { delete(p.Metadata.Annotations, AnnotationStatus) }), "not injected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decide(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if d.Redirect || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Decide = %+v, want a skip because %s", d, tt.reason)
			}
		})
	}
}

func TestDecideLabelBeatsAnnotation(t *testing.T) {
	p := injectedPod(map[string]string{AnnotationInject: "false"}, func(p *Pod) { p.Metadata.Labels = map[string]string{AnnotationInject: "true"} })
	if d, _ := Decide(p); !d.Redirect {
		t.Errorf("label inject=true should win over the annotation: %+v", d)
	}
}

func TestDecideDefaults(t *testing.T) {
	d, err := Decide(injectedPod(nil))
	if err != nil || !d.Redirect {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	want := capture.Default()
	want.OutboundCIDRs = capture.CIDRs{All: true}
	want.InboundPorts = capture.Ports{All: true}
	want.InboundExcludePorts = alwaysExcludedInbound
	want.OutboundExcludePorts = []ipt.PortRange{ipt.Port(15020)} // as Istio's plugin, without the annotation
	if diff := cmp.Diff(&want, d.Capture, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecideAnnotations(t *testing.T) {
	uid, gid := int64(2000), int64(3000)
	p := injectedPod(map[string]string{
		AnnotationInterceptionMode:  "TPROXY",
		AnnotationIncludeOutboundIP: "10.0.0.0/8",
		AnnotationExcludeOutboundIP: "10.96.0.0/12",
		AnnotationIncludeInbound:    "8080,9090",
		AnnotationExcludeInbound:    "15021,7000",
		AnnotationIncludeOutbound:   "443",
		AnnotationExcludeOutbound:   "3306:3307",
		AnnotationExcludeInterfaces: "eth9",
		AnnotationKubevirt:          "old0",
		AnnotationRerouteVirtual:    "net1",
	}, func(p *Pod) {
		proxy(p).SecurityContext = &SecurityContext{RunAsUser: &uid, RunAsGroup: &gid}
		proxy(p).Env = []EnvVar{{Name: "ISTIO_META_DNS_CAPTURE", Value: "true"}}
	})
	d, err := Decide(p)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Capture
	checks := map[string]bool{
		"mode":                c.InboundMode == capture.TProxy,
		"outbound cidr":       c.OutboundCIDRs.Prefixes[0] == netip.MustParsePrefix("10.0.0.0/8") && !c.OutboundCIDRs.All,
		"exclude cidr":        c.OutboundExcludeCIDR[0] == netip.MustParsePrefix("10.96.0.0/12"),
		"inbound":             cmp.Equal(c.InboundPorts.Ranges, []ipt.PortRange{ipt.Port(8080), ipt.Port(9090)}),
		"inbound excl":        cmp.Equal(c.InboundExcludePorts, []ipt.PortRange{ipt.Port(15021), ipt.Port(7000), ipt.Port(15020), ipt.Port(15090)}),
		"outbound":            cmp.Equal(c.OutboundPorts, []ipt.PortRange{ipt.Port(443)}),
		"outbound excl":       cmp.Equal(c.OutboundExcludePorts, []ipt.PortRange{{Lo: 3306, Hi: 3307}}),
		"interfaces":          cmp.Equal(c.ExcludeInterfaces, []string{"eth9"}),
		"virt (new key wins)": cmp.Equal(c.VirtualInterfaces, []string{"net1"}),
		"uid":                 cmp.Equal(c.ProxyUIDs, []uint32{2000}),
		"gid":                 cmp.Equal(c.ProxyGIDs, []uint32{3000}),
		"dns":                 c.RedirectDNS && c.CaptureAllDNS,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s not taken from the pod: %+v", what, c)
		}
	}
}

func TestDecideBadAnnotation(t *testing.T) {
	for key, value := range map[string]string{
		AnnotationExcludeOutbound:   "70000",
		AnnotationIncludeOutboundIP: "10.0.0.0/33",
		AnnotationInterceptionMode:  "FOO",
		AnnotationExcludeInterfaces: "a/b",
	} {
		_, err := Decide(injectedPod(map[string]string{key: value}))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), value) {
			t.Errorf("%s=%s: err = %v, want one naming both", key, value, err)
		}
	}
}

func TestDecideStatusPort(t *testing.T) {
	d, err := Decide(injectedPod(map[string]string{AnnotationStatusPort: "16020"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ipt.PortRange{ipt.Port(16020), ipt.Port(15021), ipt.Port(15090)}
	if !cmp.Equal(d.Capture.InboundExcludePorts, want) {
		t.Errorf("excluded inbound %v, want %v", d.Capture.InboundExcludePorts, want)
	}
	d, err = Decide(injectedPod(map[string]string{AnnotationStatusPort: "0"}))
	if err != nil || !cmp.Equal(d.Capture.InboundExcludePorts, want[1:]) {
		t.Errorf("status port 0 (no status server): %v %v", d.Capture.InboundExcludePorts, err)
	}
	if _, err := Decide(injectedPod(map[string]string{AnnotationStatusPort: "x"})); err == nil || !strings.Contains(err.Error(), AnnotationStatusPort) {
		t.Errorf("bad status port: %v", err)
	}
}

// TestDecideDualStack: the proxy's ISTIO_DUAL_STACK decides, with the pod's
// address order, whether IPv6 is captured, as in Istio's CNI.
func TestDecideDualStack(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{{"", false}, {"true", true}, {"false", false}} {
		p := injectedPod(nil, func(p *Pod) {
			if tc.env != "" {
				proxy(p).Env = []EnvVar{{Name: "ISTIO_DUAL_STACK", Value: tc.env}}
			}
		})
		d, err := Decide(p)
		if err != nil || !d.Redirect || d.Capture.DualStack != tc.want {
			t.Errorf("ISTIO_DUAL_STACK=%q: %+v %v, want DualStack %v", tc.env, d, err, tc.want)
		}
	}
	p := injectedPod(nil, func(p *Pod) { proxy(p).Env = []EnvVar{{Name: "ISTIO_DUAL_STACK", Value: "maybe"}} })
	if _, err := Decide(p); err == nil || !strings.Contains(err.Error(), `ISTIO_DUAL_STACK="maybe"`) {
		t.Errorf("bad ISTIO_DUAL_STACK: %v", err)
	}
}
