package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/manifests"
	"github.com/skiff-mesh/skiff/pkg/capture"
	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// servingTLS makes istiod's CA (file mode) and a TLS configuration that
// serves its certificate. ca.CA's serving certificate names istiod's DNS
// names; the harness' API server calls 127.0.0.1, for which Go clients
// send no SNI and check IP SANs, so a client without SNI gets a leaf with
// IP SAN 127.0.0.1 issued by the same CA key. Both chain to the CA root.
func servingTLS(t testing.TB) (*ca.CA, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	c, err := ca.New(context.Background(), ca.Config{SelfSignedDir: dir}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, ca.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	is, err := pki.NewIssuer(c.Issuer(), key, nil, c.Roots(), now)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := is.Issue(leafKey.Public(), pki.LeafOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ipCert := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: leafKey, Leaf: leaf}
	cfg := c.ServerTLSConfig()
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName == "" {
			return ipCert, nil
		}
		return c.ServingCertificate(hello)
	}
	return c, cfg
}

// TestServeWithCAServingCertificate: the server runs on the CA's own
// serving certificate (istiod's DNS names), as istiod wires it.
func TestServeWithCAServingCertificate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := ca.New(context.Background(), ca.Config{SelfSignedDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := webhook.New(webhook.Options{Injector: in, Validator: &validation.Validator{}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l, c.ServerTLSConfig()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{ServerName: "istiod.istio-system.svc", RootCAs: c.Roots().Pool()})
	if err != nil {
		t.Fatalf("TLS to the webhook server with istiod's name: %v", err)
	}
	fmt.Fprintf(conn, "GET /ready HTTP/1.1\r\nHost: istiod\r\nConnection: close\r\n\r\n")
	resp, _ := io.ReadAll(conn)
	conn.Close()
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 200")) {
		t.Errorf("/ready: %q", resp)
	}
	var pool *x509.CertPool = c.Roots().Pool()
	if _, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{ServerName: "evil.example", RootCAs: pool}); err == nil {
		t.Error("certificate accepted for a name it does not carry")
	}
}

// installCRDs applies Istio's published CRDs (the base chart's file) and
// waits until they are established.
func installCRDs(t testing.TB, env *kubetest.Env) {
	t.Helper()
	ctx := kubetest.Context(t)
	cs, err := apiext.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	data, err := manifests.ReadFile(manifests.CRDsPath)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var names []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Name == "" {
			continue
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, n := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", n, err)
		}
	}
}

// namespace creates a uniquely named namespace with labels, removed at the end.
func namespace(t testing.TB, client kubernetes.Interface, prefix string, labels map[string]string) string {
	t.Helper()
	name := netnstest.UniqueName(prefix)
	ctx := kubetest.Context(t)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func appPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "shop", "version": "v1"}, Annotations: annotations},
		// The harness runs without the ServiceAccount admission plugin, which
		// in a cluster sets this (the projected token volume needs it).
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{
			Name: "shop", Image: "example/shop:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")},
			}},
		}}},
	}
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// admission is a running webhook server registered in a real API server.
type admission struct {
	env      *kubetest.Env
	injector *inject.Injector
	// stopServer stops the webhook server (and is safe to call twice).
	stopServer func()
}

func startAdmission(t *testing.T) *admission {
	t.Helper()
	env := kubetest.Start(t)
	installCRDs(t, env)
	c, tlsCfg := servingTLS(t)
	cfg, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	subsets := validation.NewKubeSubsets(ic.NetworkingV1().RESTClient(), "")
	srv := webhook.New(webhook.Options{Injector: in, Validator: &validation.Validator{Subsets: subsets}, Log: testLog(t)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srvCtx, stopSrv := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- srv.Serve(srvCtx, l, tlsCfg) }()
	go func() { subsets.Run(ctx); done <- nil }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
	if err := subsets.WaitForSync(kubetest.Context(t)); err != nil {
		t.Fatal(err)
	}

	opts := webhook.ConfigurationOptions{URL: "https://" + l.Addr().String(), CABundle: c.RootCertPEM()}
	kctx := kubetest.Context(t)
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(kctx, webhook.MutatingConfiguration(opts), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(kctx, webhook.ValidatingConfiguration(opts), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server picks configurations up asynchronously: wait until a
	// pod in an injection namespace comes back injected.
	ns := namespace(t, env.Client, "wait-", map[string]string{webhook.LabelInjection: "enabled"})
	err = wait.PollUntilContextTimeout(kctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		name := netnstest.UniqueName("probe-")
		p, err := env.Client.CoreV1().Pods(ns).Create(ctx, appPod(name, nil), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		_ = env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
		return p.Annotations["sidecar.istio.io/status"] != "", nil
	})
	if err != nil {
		t.Fatalf("webhook never took effect: %v", err)
	}
	return &admission{env: env, injector: in, stopServer: stopSrv}
}

// TestRealAdmission registers the webhooks in a real kube-apiserver.
func TestRealAdmission(t *testing.T) {
	a := startAdmission(t)
	env := a.env
	ctx := kubetest.Context(t)
	pods := func(ns string) interface {
		Create(context.Context, *corev1.Pod, metav1.CreateOptions) (*corev1.Pod, error)
		Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	} {
		return env.Client.CoreV1().Pods(ns)
	}

	t.Run("labelled namespace gets the sidecar", func(t *testing.T) {
		for _, labels := range []map[string]string{{webhook.LabelInjection: "enabled"}, {webhook.LabelRevision: "default"}} {
			ns := namespace(t, env.Client, "inj-", labels)
			if _, err := pods(ns).Create(ctx, appPod("shop", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := pods(ns).Get(ctx, "shop", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n := containerNames(got.Spec.Containers); strings.Join(n, ",") != "shop,istio-proxy" {
				t.Errorf("%v: containers %v", labels, n)
			}
			if n := containerNames(got.Spec.InitContainers); strings.Join(n, ",") != "istio-init" {
				t.Errorf("%v: init containers %v", labels, n)
			}
			if got.Annotations["sidecar.istio.io/status"] == "" {
				t.Errorf("%v: no status annotation", labels)
			}
			if p := got.Spec.Containers[0].ReadinessProbe.HTTPGet; p.Path != "/app-health/shop/readyz" || p.Port.IntValue() != 15020 {
				t.Errorf("%v: app probe not rewritten: %+v", labels, p)
			}
			// The API server's pod equals the offline injector's, up to the API server's defaults.
			off, err := a.injector.Inject(appPod("shop", nil), ns)
			if err != nil {
				t.Fatal(err)
			}
			if w, g := off.Pod.Spec.InitContainers[0].Args, got.Spec.InitContainers[0].Args; strings.Join(w, " ") != strings.Join(g, " ") {
				t.Errorf("init args %q, offline %q", g, w)
			}
			if w, g := off.Pod.Annotations["sidecar.istio.io/status"], got.Annotations["sidecar.istio.io/status"]; w != g {
				t.Errorf("status %s, offline %s", g, w)
			}
		}
	})

	t.Run("unlabelled namespace is left alone", func(t *testing.T) {
		ns := namespace(t, env.Client, "plain-", nil)
		if _, err := pods(ns).Create(ctx, appPod("shop", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pods(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Containers) != 1 || len(got.Spec.InitContainers) != 0 || got.Annotations["sidecar.istio.io/status"] != "" {
			t.Errorf("pod changed: containers %v, init %v", containerNames(got.Spec.Containers), containerNames(got.Spec.InitContainers))
		}
		// ...unless the pod asks for it.
		p := appPod("opt-in", nil)
		p.Labels[webhook.LabelInject] = "true"
		got, err = pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Containers) != 2 {
			t.Errorf("opted-in pod not injected: %v", containerNames(got.Spec.Containers))
		}
	})

	t.Run("opt-out and bad annotations", func(t *testing.T) {
		ns := namespace(t, env.Client, "inj-", map[string]string{webhook.LabelInjection: "enabled"})
		p := appPod("off", nil)
		p.Labels[webhook.LabelInject] = "false"
		got, err := pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil || len(got.Spec.Containers) != 1 {
			t.Errorf("opted-out pod: %v, containers %v", err, got)
		}
		_, err = pods(ns).Create(ctx, appPod("bad", map[string]string{"traffic.sidecar.istio.io/includeInboundPorts": "80,http"}), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "traffic.sidecar.istio.io/includeInboundPorts") {
			t.Errorf("pod with a bad annotation: %v", err)
		} else {
			t.Logf("refused as expected: %v", err)
		}
		host := appPod("host", nil)
		host.Spec.HostNetwork = true
		got, err = pods(ns).Create(ctx, host, metav1.CreateOptions{})
		if err != nil || len(got.Spec.Containers) != 1 {
			t.Errorf("hostNetwork pod: %v, containers %v", err, containerNames(got.Spec.Containers))
		}
	})

	t.Run("invalid config refused with the reason", func(t *testing.T) {
		dyn, err := dynamic.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		ns := namespace(t, env.Client, "cfg-", nil)
		vsRes := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
		drRes := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
		create := func(res schema.GroupVersionResource, doc string) error {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			_, err := dyn.Resource(res).Namespace(ns).Create(ctx, &obj, metav1.CreateOptions{})
			return err
		}
		err = create(vsRes, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: -70
    - destination: {host: reviews, subset: v2}
      weight: 20
`)
		if err == nil || !strings.Contains(err.Error(), "spec.http[0].route[0].weight: -70: must not be negative") || !strings.Contains(err.Error(), "denied the request") {
			t.Fatalf("invalid VirtualService: %v", err)
		}
		t.Logf("refused as expected: %v", err)
		if err := create(drRes, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
`); err != nil {
			t.Fatal(err)
		}
		// The informer sees the rule shortly after it is created.
		var last error
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			// A fresh name per try: a try that beat the informer is accepted.
			last = create(vsRes, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: `+netnstest.UniqueName("v3-")+`}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v3}
`)
			return last != nil, nil
		})
		if last == nil || !strings.Contains(last.Error(), "unknown subset") {
			t.Errorf("VirtualService with an unknown subset: %v", last)
		}
		if err := create(vsRes, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-ok}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
`); err != nil {
			t.Errorf("valid VirtualService refused: %v", err)
		}
	})

	// Last: with istiod gone, failurePolicy Fail refuses pods that would be
	// injected and config that would be validated; other pods are unaffected.
	t.Run("failurePolicy Fail when istiod is down", func(t *testing.T) {
		inj := namespace(t, env.Client, "down-", map[string]string{webhook.LabelInjection: "enabled"})
		plain := namespace(t, env.Client, "plain-", nil)
		a.stopServer()
		_, err := pods(inj).Create(ctx, appPod("shop", nil), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("pod in an injection namespace with istiod down: %v", err)
		} else {
			t.Logf("refused as expected: %v", err)
		}
		if _, err := pods(plain).Create(ctx, appPod("shop", nil), metav1.CreateOptions{}); err != nil {
			t.Errorf("pod in a plain namespace with istiod down: %v", err)
		}
	})
}

// TestInjectedInitProgramsCapture: pods admitted by the real API server
// carry istio-init arguments that, run by our istio-iptables in a network
// namespace, program exactly the rules the annotations asked for.
func TestInjectedInitProgramsCapture(t *testing.T) {
	netnstest.RequireRoot(t)
	a := startAdmission(t)
	ctx := kubetest.Context(t)
	bin := filepath.Join(t.TempDir(), "istio-iptables")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/skiff-mesh/skiff/cmd/istio-iptables").CombinedOutput(); err != nil {
		t.Fatalf("build istio-iptables: %v\n%s", err, out)
	}
	ns := namespace(t, a.env.Client, "cap-", map[string]string{webhook.LabelInjection: "enabled"})
	ports := func(ps ...uint16) []ipt.PortRange {
		var out []ipt.PortRange
		for _, p := range ps {
			out = append(out, ipt.Port(p))
		}
		return out
	}
	prefixes := func(ps ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        func(c *capture.Config)
		rules       []string // rules that must be in iptables-save's output
	}{
		{name: "defaults", want: func(*capture.Config) {}, rules: []string{
			"-A ISTIO_INBOUND -p tcp -m tcp --dport 15020 -j RETURN", "-A ISTIO_OUTPUT -j ISTIO_REDIRECT",
		}},
		{name: "traffic", annotations: map[string]string{
			"traffic.sidecar.istio.io/includeOutboundIPRanges": "10.0.0.0/8,172.16.0.0/12",
			"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.96.0.1/32",
			"traffic.sidecar.istio.io/includeInboundPorts":     "8080,9090",
			"traffic.sidecar.istio.io/excludeInboundPorts":     "9090",
			"traffic.sidecar.istio.io/includeOutboundPorts":    "5432",
			"traffic.sidecar.istio.io/excludeOutboundPorts":    "6379,11211",
			"traffic.sidecar.istio.io/excludeInterfaces":       "eth1",
			"istio.io/reroute-virtual-interfaces":              "tap0",
		}, want: func(c *capture.Config) {
			c.OutboundCIDRs = capture.CIDRs{Prefixes: prefixes("10.0.0.0/8", "172.16.0.0/12")}
			c.OutboundExcludeCIDR = prefixes("10.96.0.1/32")
			c.InboundPorts = capture.Ports{Ranges: ports(8080, 9090)}
			c.InboundExcludePorts = ports(15090, 15021, 15020, 9090)
			c.OutboundPorts = ports(5432)
			c.OutboundExcludePorts = ports(6379, 11211)
			c.ExcludeInterfaces = []string{"eth1"}
			c.VirtualInterfaces = []string{"tap0"}
		}, rules: []string{
			"-A ISTIO_OUTPUT -p tcp -m tcp --dport 6379 -j RETURN",
			"-A ISTIO_OUTPUT -p udp -m udp --dport 11211 -j RETURN",
			"-A ISTIO_OUTPUT -d 10.96.0.1/32 -j RETURN",
			"-A ISTIO_OUTPUT -d 172.16.0.0/12 -j ISTIO_REDIRECT",
			"-A ISTIO_OUTPUT -p tcp -m tcp --dport 5432 -j ISTIO_REDIRECT",
			"-A ISTIO_INBOUND -p tcp -m tcp --dport 8080 -j ISTIO_IN_REDIRECT",
			"-A PREROUTING -i eth1 -j RETURN",
		}},
		{name: "tproxy", annotations: map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY"}, want: func(c *capture.Config) {
			c.InboundMode = capture.TProxy
		}, rules: []string{"-j TPROXY --on-port 15006"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := netnstest.UniqueName("cap-")
			if _, err := a.env.Client.CoreV1().Pods(ns).Create(ctx, appPod(name, tc.annotations), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pod, err := a.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Name != "istio-init" {
				t.Fatalf("no istio-init: %v", containerNames(pod.Spec.InitContainers))
			}
			init := pod.Spec.InitContainers[0]
			if init.Args[0] != "istio-iptables" {
				t.Fatalf("args %q", init.Args)
			}
			caps := init.SecurityContext.Capabilities
			if fmt.Sprint(caps.Add) != "[NET_ADMIN NET_RAW]" || *init.SecurityContext.RunAsUser != 0 || *init.SecurityContext.RunAsNonRoot {
				t.Errorf("istio-init security context %+v", init.SecurityContext)
			}
			netns := netnstest.New(t)
			cmd := exec.Command(bin, append(init.Args[1:], "--network-namespace", netns.Path)...)
			cmd.Env = os.Environ()
			for _, e := range init.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("istio-iptables %q: %v\n%s", init.Args[1:], err, out)
			}
			saved := netns.Exec(t, "iptables-nft-save")
			st, err := ipt.ParseSave(saved)
			if err != nil {
				t.Fatal(err)
			}
			want := capture.Injector()
			tc.want(&want)
			for _, rs := range capture.Build(&want.Policy) {
				if rs.Family != ipt.IPv4 {
					continue
				}
				if d := ipt.Drift(rs, st, capture.Ownership()); len(d) > 0 {
					t.Errorf("rules differ from what the annotations ask for:\n%s\n--- iptables-save:\n%s", strings.Join(d, "\n"), saved)
				}
			}
			for _, r := range tc.rules {
				if !strings.Contains(saved, r) {
					t.Errorf("iptables-save lacks %q:\n%s", r, saved)
				}
			}
		})
	}
}
