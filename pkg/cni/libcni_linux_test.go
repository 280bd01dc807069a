package cni_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/origdst"
)

// Debian's containernetworking-plugins.
const debianPlugins = "/usr/lib/cni"

var (
	pluginDir string        // holds our plugin, built once, as "istio-cni", and its helper
	kube      *kubetest.Env // one API server for the package's tests
)

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			return m.Run() // privileged tests skip themselves
		}
		dir, err := os.MkdirTemp("", "cni-test-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		pluginDir = dir
		// Built as make build and the images build it (static, stripped),
		// so the benchmarks time the binary a node runs.
		// The helper beside it, as install-cni installs them.
		for name, pkg := range map[string]string{"istio-cni": "../../cmd/cni-plugin", cni.LookupBinary: "../../cmd/cni-lookup"} {
			build := exec.Command("go", "build", "-ldflags", "-s -w", "-o", filepath.Join(dir, name), pkg)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				panic(string(out))
			}
		}
		if kube, err = kubetest.StartEnv(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer kube.Stop()
		return m.Run()
	}()
	os.Exit(code)
}

// node is a "node" namespace where libcni runs the conflist (so bridges and
// veths never touch the host), with the plugin's files in a temp dir.
type node struct {
	ns       *netnstest.NS
	dir      string
	cni      *libcni.CNIConfig
	conflist *libcni.NetworkConfigList
	// stderr, when set, receives the plugins' stderr instead of the
	// test's (the benchmarks keep their output to the figures).
	stderr *os.File
}

func newNode(t testing.TB, extra map[string]any) *node {
	t.Helper()
	netnstest.RequireRoot(t)
	n := &node{ns: netnstest.New(t), dir: t.TempDir()}
	// The plugin runs in the node namespace: give it the API server on the
	// node's own loopback, forwarded by the test process.
	api := forwardInto(t, n.ns, strings.TrimPrefix(kube.URL, "https://"))
	if err := kubetest.WriteKubeconfig(filepath.Join(n.dir, cni.KubeconfigName), "https://"+api, kube.CAFile, kube.Config.BearerToken); err != nil {
		t.Fatal(err)
	}
	ours := map[string]any{
		"type": "istio-cni", "plugin_log_level": "debug", "cni_agent_run_dir": n.dir,
		"exclude_namespaces": []string{"kube-system"}, "pod_lookup_tries": 3, "pod_lookup_interval": "50ms",
	}
	for k, v := range extra {
		ours[k] = v
	}
	version := "1.0.0" // Debian's bridge speaks up to 1.0.0
	if v, ok := extra["cniVersion"].(string); ok {
		version = v
		delete(ours, "cniVersion")
	}
	list := map[string]any{
		"cniVersion": version, "name": "skiffnet",
		"plugins": []any{
			map[string]any{"type": "bridge", "bridge": "skbr0", "isGateway": true,
				"ipam": map[string]any{"type": "host-local", "dataDir": filepath.Join(n.dir, "ipam"),
					"ranges": [][]map[string]string{{{"subnet": "10.88.0.0/16"}}}}},
			ours,
		},
	}
	b, _ := json.Marshal(list)
	var err error
	if n.conflist, err = libcni.ConfListFromBytes(b); err != nil {
		t.Fatal(err)
	}
	n.cni = n.plugins(pluginDir)
	return n
}

// plugins runs the chain with the plugins of dir (our plugin, or Istio's)
// and Debian's, with the node's cache. The exec is given, never left nil: libcni fills a nil one in lazily on
// first use, a data race when the first ADDs run concurrently.
func (n *node) plugins(dir string) *libcni.CNIConfig {
	stderr := n.stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: stderr}, PluginDecoder: version.PluginDecoder{}}
	return libcni.NewCNIConfigWithCacheDir([]string{dir, debianPlugins}, filepath.Join(n.dir, "cache"), exec)
}

// createPod makes a real Pod object in the API server.
func createPod(t testing.TB, name string, annotations map[string]string, proxyEnv ...corev1.EnvVar) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-validation", Image: "skiff/proxy"}},
			Containers: []corev1.Container{
				{Name: "app", Image: "app"},
				{Name: "istio-proxy", Image: "skiff/proxy", Args: []string{"proxy", "sidecar"}, Env: proxyEnv},
			},
		},
	}
	ctx := kubetest.Context(t)
	if _, err := kube.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func injected(extra map[string]string) map[string]string {
	a := map[string]string{cni.AnnotationStatus: `{"containers":["istio-proxy"]}`}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

func (n *node) rt(pod *netnstest.NS, name string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: "c-" + name, NetNS: pod.Path, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", "c-" + name}},
	}
}

// do runs a libcni operation from inside the node namespace.
func (n *node) do(t *testing.T, fn func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return netns.Do(n.ns.Path, func() error { return fn(ctx) })
}

func (n *node) add(t *testing.T, pod *netnstest.NS, name string) (*current.Result, error) {
	var res types.Result
	err := n.do(t, func(ctx context.Context) (err error) {
		res, err = n.cni.AddNetworkList(ctx, n.conflist, n.rt(pod, name))
		return err
	})
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(res)
}

func podIP(t *testing.T, res *current.Result) netip.Addr {
	t.Helper()
	if len(res.IPs) == 0 {
		t.Fatalf("result has no IP: %+v", res)
	}
	a, _ := netip.AddrFromSlice(res.IPs[0].Address.IP.To4())
	return a
}

func istioRules(t *testing.T, pod *netnstest.NS) string {
	var b strings.Builder
	for _, l := range strings.Split(pod.Exec(t, "iptables-save"), "\n") {
		if strings.Contains(l, "ISTIO") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestAddCapturesAsAnnotated(t *testing.T) {
	n := newNode(t, nil)
	pod := netnstest.New(t)
	createPod(t, "reviews-v1", injected(map[string]string{"traffic.sidecar.istio.io/excludeOutboundPorts": "8081"}))
	res, err := n.add(t, pod, "reviews-v1")
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if !podIP(t, res).IsValid() {
		t.Fatal("no pod IP passed through")
	}
	gw := "10.88.0.1"
	captured := listenIn(t, pod, ":15001")
	direct8080, direct8081 := listenIn(t, n.ns, gw+":8080"), listenIn(t, n.ns, gw+":8081")

	dialFrom(t, pod, gw+":8080")
	if got := wait(t, captured); got != gw+":8080" {
		t.Errorf("outbound to %s:8080 captured with original destination %q", gw, got)
	}
	dialFrom(t, pod, gw+":8081")
	if got := wait(t, direct8081); got != gw+":8081" {
		t.Errorf("excluded port 8081 did not go straight out (got %q)", got)
	}
	select {
	case c := <-direct8080:
		t.Errorf("8080 reached the node directly: %s", c)
	default:
	}

	if err := n.do(t, func(ctx context.Context) error {
		return n.cni.CheckNetworkList(ctx, n.conflist, n.rt(pod, "reviews-v1"))
	}); err != nil {
		t.Errorf("CHECK on an intact pod: %v", err)
	}
	pod.Exec(t, "iptables", "-t", "nat", "-D", "ISTIO_OUTPUT", "-j", "ISTIO_REDIRECT")
	err = n.do(t, func(ctx context.Context) error {
		return n.cni.CheckNetworkList(ctx, n.conflist, n.rt(pod, "reviews-v1"))
	})
	if err == nil || !strings.Contains(err.Error(), "missing -A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
		t.Errorf("CHECK after removing a rule: %v, want it named", err)
	}
	if err := n.do(t, func(ctx context.Context) error { return n.cni.DelNetworkList(ctx, n.conflist, n.rt(pod, "reviews-v1")) }); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

func TestAddPassesThroughUninjectedPods(t *testing.T) {
	n := newNode(t, nil)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{
		{"plain", nil},
		{"opted-out", injected(map[string]string{"sidecar.istio.io/inject": "false"})},
	} {
		pod := netnstest.New(t)
		createPod(t, tc.name, tc.annotations)
		if _, err := n.add(t, pod, tc.name); err != nil {
			t.Fatalf("%s: ADD: %v", tc.name, err)
		}
		if r := istioRules(t, pod); r != "" {
			t.Errorf("%s: rules installed:\n%s", tc.name, r)
		}
	}
}

func TestAddDNSCaptureFromProxyEnv(t *testing.T) {
	n := newNode(t, nil)
	pod := netnstest.New(t)
	createPod(t, "dns", injected(nil), corev1.EnvVar{Name: "ISTIO_META_DNS_CAPTURE", Value: "true"})
	if _, err := n.add(t, pod, "dns"); err != nil {
		t.Fatal(err)
	}
	if r := istioRules(t, pod); !strings.Contains(r, "-A ISTIO_OUTPUT_DNS -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053") {
		t.Errorf("DNS capture missing:\n%s", r)
	}
}

func TestBadAnnotationFailsAddAndChangesNothing(t *testing.T) {
	n := newNode(t, nil)
	pod := netnstest.New(t)
	createPod(t, "bad", injected(map[string]string{"traffic.sidecar.istio.io/excludeOutboundPorts": "70000"}))
	_, err := n.add(t, pod, "bad")
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("ADD: %v, want a CNI error with code %d", err, types.ErrInvalidNetworkConfig)
	}
	if !strings.Contains(ce.Details, "traffic.sidecar.istio.io/excludeOutboundPorts") || !strings.Contains(ce.Details, "70000") {
		t.Errorf("error %q does not name the annotation and value", ce.Details)
	}
	if r := istioRules(t, pod); r != "" {
		t.Errorf("rules installed after a failed ADD:\n%s", r)
	}
}

func TestUnreachableAPIServer(t *testing.T) {
	n := newNode(t, nil)
	kc := filepath.Join(n.dir, cni.KubeconfigName)
	if err := kubetest.WriteKubeconfig(kc, "https://127.0.0.1:1", kube.CAFile, "x"); err != nil {
		t.Fatal(err)
	}
	pod := netnstest.New(t)
	_, err := n.add(t, pod, "anything")
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrTryAgainLater || !strings.Contains(ce.Details, "default/anything") {
		t.Fatalf("ADD with the API server down: %v, want code %d naming the pod", err, types.ErrTryAgainLater)
	}
}

// TestAddFromPodCache: with install-cni's pod cache publishing the node's
// pods (pkg/cni/podcache on the API server), the ADD reads the pod from its
// file and captures with the API server out of reach; a pod of the same
// name with another uid in CNI_ARGS is not taken from the file.
func TestAddFromPodCache(t *testing.T) {
	n := newNode(t, nil)
	cache := startPodCache(t, n)
	createPod(t, "cached", injected(nil))
	bindAndWait(t, cache, "cached")
	if err := kubetest.WriteKubeconfig(filepath.Join(n.dir, cni.KubeconfigName), "https://127.0.0.1:1", kube.CAFile, "x"); err != nil {
		t.Fatal(err)
	}
	pod := netnstest.New(t)
	if _, err := n.add(t, pod, "cached"); err != nil {
		t.Fatalf("ADD of a cached pod with the API server down: %v", err)
	}
	if rules := istioRules(t, pod); !strings.Contains(rules, "--to-ports 15001") {
		t.Errorf("no capture from the cached pod:\n%s", rules)
	}
	other := netnstest.New(t)
	rt := n.rt(other, "cached")
	rt.ContainerID = "c-cached-again"
	rt.Args = append(rt.Args, [2]string{"K8S_POD_UID", "not-the-cached-one"})
	err := n.do(t, func(ctx context.Context) error {
		_, err := n.cni.AddNetworkList(ctx, n.conflist, rt)
		return err
	})
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrTryAgainLater {
		t.Errorf("ADD of a pod whose uid is not the cached one's: %v, want the API server asked (code %d)", err, types.ErrTryAgainLater)
	}
}

func TestConcurrentAddsLegacy(t *testing.T) {
	n := newNode(t, map[string]any{"iptables_backend": "legacy"})
	const pods = 30
	nss := make([]*netnstest.NS, pods)
	for i := range nss {
		nss[i] = netnstest.New(t)
		createPod(t, fmt.Sprintf("p%02d", i), injected(nil))
	}
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	for i, pod := range nss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.add(t, pod, fmt.Sprintf("p%02d", i)); err != nil {
				errs <- fmt.Errorf("p%02d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, pod := range nss {
		if !strings.Contains(pod.Exec(t, "iptables-legacy-save"), "-A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
			t.Errorf("%s: no legacy rules", pod.Name)
		}
	}
}

// TestStatusAndGC uses spec 1.1.0, which Debian's plugins do not speak: the
// list holds our plugin alone.
func TestStatusAndGC(t *testing.T) {
	n := newNode(t, map[string]any{"cniVersion": "1.1.0"})
	n.onlyOurs(t)
	if err := n.do(t, func(ctx context.Context) error { return n.cni.GetStatusNetworkList(ctx, n.conflist) }); err != nil {
		t.Errorf("STATUS with a kubeconfig: %v", err)
	}
	if err := n.do(t, func(ctx context.Context) error {
		return n.cni.GCNetworkList(ctx, n.conflist, &libcni.GCArgs{})
	}); err != nil {
		t.Errorf("GC: %v", err)
	}
	os.Remove(filepath.Join(n.dir, cni.KubeconfigName))
	err := n.do(t, func(ctx context.Context) error { return n.cni.GetStatusNetworkList(ctx, n.conflist) })
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS without a kubeconfig: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
}

// forwardInto listens on 127.0.0.1 inside ns and relays each connection to
// target on the host's loopback. It returns the address inside ns.
func forwardInto(t testing.TB, ns *netnstest.NS, target string) string {
	t.Helper()
	var ln net.Listener
	ns.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// onlyOurs drops the bridge from the node's conflist.
func (n *node) onlyOurs(t testing.TB) {
	var list map[string]any
	_ = json.Unmarshal(n.conflist.Bytes, &list)
	list["plugins"] = list["plugins"].([]any)[1:]
	raw, _ := json.Marshal(list)
	var err error
	if n.conflist, err = libcni.ConfListFromBytes(raw); err != nil {
		t.Fatal(err)
	}
}

// TestSpecVersions chains the plugin at every version Debian's bridge speaks,
// and alone at 1.1.0, with a captured pod each time.
func TestSpecVersions(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, map[string]any{"cniVersion": v})
			if v == "1.1.0" {
				n.onlyOurs(t)
			}
			pod := netnstest.New(t)
			name := "v" + strings.ReplaceAll(v, ".", "")
			createPod(t, name, injected(nil))
			if _, err := n.add(t, pod, name); err != nil {
				t.Fatalf("ADD at %s: %v", v, err)
			}
			if !strings.Contains(istioRules(t, pod), "-A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
				t.Errorf("no rules at %s", v)
			}
		})
	}
}

// listenIn listens in a namespace and reports each connection's original destination.
func listenIn(t *testing.T, ns *netnstest.NS, addr string) chan string {
	t.Helper()
	got := make(chan string, 4)
	var ln net.Listener
	ns.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dst, err := origdst.Of(c.(*net.TCPConn))
			if err != nil {
				got <- c.LocalAddr().String()
			} else {
				got <- dst.String()
			}
			c.Close()
		}
	}()
	return got
}

func dialFrom(t *testing.T, ns *netnstest.NS, addr string) {
	t.Helper()
	ns.Do(t, func() error {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

func wait(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		return "(nothing)"
	}
}
