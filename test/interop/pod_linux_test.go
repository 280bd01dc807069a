package interop

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// podIP is the address of every test pod (each in its own namespace).
const podIP = "10.1.2.3"

// meshObjects creates a namespace, the service account app and a Service
// reviews (ClusterIP 10.0.0.50, port 9080) in it, and istio-system.
func meshObjects(t *testing.T, ctx context.Context, env *kubetest.Env, ns string) {
	t.Helper()
	cs := env.Client
	for _, name := range []string{"istio-system", ns} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.50", Selector: map[string]string{"app": "reviews"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9080}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod is a workload's network namespace and file system root, with the
// istio-proxy container of its spec as Istio's kube-inject makes it.
type pod struct {
	name, namespace string
	ns              *netnstest.NS
	root            string
	proxy           corev1.Container
}

// startPodEnv starts the API server for a test that makes pods with newPod.
// It renders Istio's charts first: on a new machine that downloads Istio's
// module, which must not use up the minute of the API server's context.
func startPodEnv(t *testing.T) (*kubetest.Env, context.Context) {
	t.Helper()
	istioInjectFiles(t)
	return crdtest.Start(t)
}

// newPod injects pod app-0 (service account app) with Istio's
// kube-inject and lays out what kubelet would mount for its istio-proxy
// container: the istio-ca token, the root certificate from the
// istio-ca-root-cert ConfigMap, the podinfo files. The namespace resolves
// istiod.istio-system.svc to loopback, where a forwarder reaches
// istiodSecure on the host.
func newPod(t *testing.T, ctx context.Context, env *kubetest.Env, namespace, istiodSecure string) *pod {
	t.Helper()
	p := &pod{name: "app-0", namespace: namespace, root: t.TempDir()}
	in := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace, Labels: map[string]string{"app": "app"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	injected := kubeInject(t, in)
	found := false
	for _, c := range append(injected.Spec.InitContainers, injected.Spec.Containers...) {
		if c.Name == "istio-proxy" {
			p.proxy, found = c, true
		}
	}
	if !found {
		t.Fatal("kube-inject added no istio-proxy container")
	}
	exp := int64(3600)
	tok, err := env.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "app",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var root string
	polltest.Within(t, 30*time.Second, "ConfigMap istio-ca-root-cert in "+namespace, func() bool {
		cm, err := env.Client.CoreV1().ConfigMaps(namespace).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return false
		}
		root = cm.Data["root-cert.pem"]
		return root != ""
	})
	for path, content := range map[string]string{
		"var/run/secrets/tokens/istio-token":  tok.Status.Token,
		"var/run/secrets/istio/root-cert.pem": root,
		"etc/istio/pod/labels":                `app="app"` + "\n",
		"etc/istio/pod/annotations":           "",
	} {
		write(t, filepath.Join(p.root, path), content)
	}
	for _, dir := range []string{"var/run/secrets/workload-spiffe-uds", "var/run/secrets/credential-uds",
		"var/run/secrets/workload-spiffe-credentials", "var/lib/istio/data", "etc/istio/proxy"} {
		if err := os.MkdirAll(filepath.Join(p.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.ns = netnstest.New(t)
	p.ns.SetResolvConf(t, "search "+namespace+".svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\n")
	write(t, filepath.Join("/etc/netns", p.ns.Name, "hosts"), "127.0.0.1 localhost\n127.0.0.1 istiod.istio-system.svc\n")
	p.ns.Exec(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
	p.ns.Exec(t, "ip", "addr", "add", podIP+"/24", "dev", "eth0")
	p.ns.Exec(t, "ip", "link", "set", "eth0", "up")
	forward(t, p.ns, "127.0.0.1:15012", istiodSecure)
	return p
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// forward listens on addr inside ns and relays each connection to target
// on the host's loopback, until the test ends.
func forward(t *testing.T, ns *netnstest.NS, addr, target string) {
	t.Helper()
	var l net.Listener
	ns.Do(t, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	t.Cleanup(func() { l.Close() })
	go relay(l, func() (net.Conn, error) { return net.Dial("tcp", target) })
}

// relay carries each connection l accepts to one dial makes, both ways,
// until l is closed.
func relay(l net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := dial()
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			_, _ = io.Copy(c, u)
		}()
	}
}

// env is the istio-proxy container's environment with the downward API
// resolved as kubelet would for this pod, plus extra.
func (p *pod) env(extra ...string) []string {
	field := map[string]string{
		"metadata.name": p.name, "metadata.namespace": p.namespace, "status.podIP": podIP,
		"spec.serviceAccountName": "app", "status.hostIP": "10.1.2.1", "spec.nodeName": "node-0",
	}
	resource := map[string]string{"limits.cpu": "2", "limits.memory": "1073741824"}
	vars := map[string]string{}
	var out []string
	for _, e := range p.proxy.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v = field[e.ValueFrom.FieldRef.FieldPath]
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			v = resource[e.ValueFrom.ResourceFieldRef.Resource]
		}
		v = os.Expand(v, func(k string) string { return vars[k] })
		vars[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return append(append(out, "PATH="+os.Getenv("PATH")), extra...)
}

// args is the container's args with $(VAR) expanded from its environment.
func (p *pod) args() []string {
	vars := map[string]string{}
	for _, kv := range p.env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var out []string
	for _, a := range p.proxy.Args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		out = append(out, a)
	}
	return out
}

// start runs bin as the pod's istio-proxy container (its args, its
// environment plus extra) in the pod's namespace, from the pod's root.
func (p *pod) start(t *testing.T, bin string, extra ...string) *logtest.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.ns.Name, bin}, p.args()...)...)
	cmd.Dir = p.root
	cmd.Env = p.env(extra...)
	logs := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", filepath.Base(bin), logs.String())
		}
	})
	return logs
}

// lookup asks the pod's DNS proxy (127.0.0.1:15053 in its namespace) for
// name's A record and returns the addresses it answers.
func (p *pod) lookup(t *testing.T, name string) []string {
	t.Helper()
	var addrs []string
	p.ns.Do(t, func() error {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		c := &dns.Client{Timeout: time.Second}
		r, _, err := c.Exchange(m, "127.0.0.1:15053")
		if err != nil {
			return nil
		}
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				addrs = append(addrs, a.A.String())
			}
		}
		return nil
	})
	return addrs
}
