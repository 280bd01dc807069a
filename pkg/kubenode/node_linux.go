package kubenode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// Options configure a node.
type Options struct {
	// Images are OCI image-layout tars imported into containerd before the
	// kubelet starts; one of them must be SandboxImage.
	Images []string
	// Hosts are names outside the cluster that the cluster DNS answers.
	Hosts []HostEntry
	// Dir is where the node keeps its files; empty makes a new directory
	// that Stop removes.
	Dir string
}

// Node is a running single-node cluster.
type Node struct {
	// Name is the node's name and hostname.
	Name string
	// Dir holds everything the node wrote: logs/ has each component's log.
	Dir string
	// Kubeconfig is a cluster-admin kubeconfig usable outside the node
	// (through a relay on loopback); Config and Client are the same.
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// NodeKubeconfig is the same identity for processes inside the node.
	NodeKubeconfig string

	ns      *namespace
	relay   *relay
	procs   []*proc
	ownsDir bool
}

// proc is one of the node's long-running components.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it exits
}

// Start runs a node for the test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := StartNode(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			n.dumpLogs(t)
		}
		n.Stop()
	})
	return n
}

// StartNode brings a node up and waits until it is Ready; the caller must
// Stop it, also when StartNode fails after creating things (Stop on a
// partly started node is safe, and StartNode calls it itself on error).
func StartNode(ctx context.Context, opts Options) (n *Node, err error) {
	assets, err := kubetest.AssetsDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make k8s-assets`", b, assets)
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "unshare", "nsenter"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s not found: run `make deps`", b)
		}
	}
	n = &Node{Name: "node-" + randomHex(4), Dir: opts.Dir}
	if n.Dir == "" {
		if n.Dir, err = os.MkdirTemp("", "skiff-node-"); err != nil {
			return nil, err
		}
		n.ownsDir = true
	}
	defer func() {
		if err != nil {
			n.Stop()
			n = nil
		}
	}()
	if err := n.bringUp(ctx, assets, opts); err != nil {
		return n, fmt.Errorf("node %s (logs in %s): %w", n.Name, n.Dir, err)
	}
	return n, nil
}

func (n *Node) bringUp(ctx context.Context, assets string, opts Options) error {
	pk, err := writePKI(n.Dir, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(APIServiceIP)})
	if err != nil {
		return err
	}
	if n.ns, err = newNamespace(n.Dir, n.Name, nodeCIDR, nodeGateway, n.ownsDir); err != nil {
		return err
	}
	f := &files{Dir: n.Dir, Name: n.Name, NodeIP: NodeIP, PodCIDR: PodCIDR, ServiceCIDR: ServiceCIDR,
		ClusterDomain: ClusterDomain, CgroupRoot: n.ns.cg.PodRoot(), SandboxImage: SandboxImage,
		CNIBinDir: CNIBinDir, CNIConfDir: CNIConfDir, APIPort: apiPort, PKI: pk, Hosts: opts.Hosts}
	if err := n.writeFiles(ctx, f); err != nil {
		return err
	}
	adminToken, nodeToken := randomHex(16), randomHex(16)
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,system:node:%s,node-uid,system:nodes\n", adminToken, nodeToken, n.Name)
	if err := os.WriteFile(filepath.Join(n.Dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	inside := fmt.Sprintf("https://%s:%d", NodeIP, apiPort)
	n.NodeKubeconfig = filepath.Join(n.Dir, "kubeconfig.admin")
	if err := errors.Join(
		kubetest.WriteKubeconfig(n.NodeKubeconfig, inside, pk.CA, adminToken),
		kubetest.WriteKubeconfig(filepath.Join(n.Dir, "kubeconfig.kubelet"), inside, pk.CA, nodeToken),
	); err != nil {
		return err
	}

	if err := n.spawn("etcd", filepath.Join(assets, "etcd"), "--data-dir="+filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=error"); err != nil {
		return err
	}
	if err := n.spawn("kube-apiserver", filepath.Join(assets, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379", "--bind-address=0.0.0.0", "--advertise-address="+NodeIP,
		"--secure-port="+strconv.Itoa(apiPort), "--tls-cert-file="+pk.ServerCert, "--tls-private-key-file="+pk.ServerKey,
		"--client-ca-file="+pk.CA, "--kubelet-client-certificate="+pk.ClientCert, "--kubelet-client-key="+pk.ClientKey,
		"--kubelet-preferred-address-types=InternalIP,Hostname", "--enable-aggregator-routing=true",
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDomain,
		"--api-audiences=https://kubernetes.default.svc."+ClusterDomain+",istio-ca",
		"--service-account-key-file="+pk.SAPub, "--service-account-signing-key-file="+pk.SAKey,
		"--service-cluster-ip-range="+ServiceCIDR, "--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--token-auth-file="+filepath.Join(n.Dir, "tokens.csv"), "--enable-priority-and-fairness=false",
		"--profiling=false", "--v=0"); err != nil {
		return err
	}
	if n.relay, err = newRelay(n.ns.NetNS(), net.JoinHostPort(NodeIP, strconv.Itoa(apiPort))); err != nil {
		return err
	}
	n.Config = &rest.Config{Host: "https://" + n.relay.Addr(), BearerToken: adminToken, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{CAFile: pk.CA}}
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	if err := kubetest.WriteKubeconfig(n.Kubeconfig, n.Config.Host, pk.CA, adminToken); err != nil {
		return err
	}
	if n.Client, err = kubernetes.NewForConfig(n.Config); err != nil {
		return err
	}
	if err := n.waitAPI(ctx); err != nil {
		return err
	}
	kc := "--kubeconfig=" + n.NodeKubeconfig
	if err := errors.Join(
		n.spawn("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), kc,
			"--root-ca-file="+pk.CA, "--service-account-private-key-file="+pk.SAKey, "--leader-elect=false",
			"--use-service-account-credentials=false", "--bind-address=127.0.0.1", "--controllers=*,-nodeipam",
			"--cluster-signing-cert-file="+pk.CA, "--profiling=false", "--v=0"),
		n.spawn("kube-scheduler", filepath.Join(assets, "kube-scheduler"), kc, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--profiling=false", "--v=0"),
		n.spawn("containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml")),
	); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	if err := n.ImportImages(ctx, opts.Images...); err != nil {
		return err
	}
	if err := errors.Join(
		n.spawn("kubelet", filepath.Join(assets, "kubelet"), "--config="+filepath.Join(n.Dir, "kubelet.yaml"),
			"--kubeconfig="+filepath.Join(n.Dir, "kubeconfig.kubelet"), "--hostname-override="+n.Name,
			"--node-ip="+NodeIP, "--v=1"),
		n.spawn("kube-proxy", filepath.Join(assets, "kube-proxy"), "--config="+filepath.Join(n.Dir, "kube-proxy.yaml"), "--v=0"),
		n.spawn("coredns", filepath.Join(assets, "coredns"), "-conf", filepath.Join(n.Dir, "Corefile")),
	); err != nil {
		return err
	}
	if err := n.waitDNS(ctx); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// writeFiles renders the configuration and puts the node's /etc and /opt
// files in place inside the namespace (they land in the overlays).
func (n *Node) writeFiles(ctx context.Context, f *files) error {
	for name, path := range map[string]string{
		"containerd.toml": "containerd.toml", "kubelet.yaml": "kubelet.yaml", "kube-proxy.yaml": "kube-proxy.yaml",
		"Corefile": "Corefile", "external.hosts": "external.hosts", "conflist": "etc/" + ConflistName,
		"pod-resolv.conf": "pod-resolv.conf", "hosts": "etc/hosts",
	} {
		if err := f.render(name, filepath.Join(n.Dir, path)); err != nil {
			return err
		}
	}
	script := strings.Join([]string{
		"set -e",
		"cp etc/hosts /etc/hosts",
		"cp pod-resolv.conf /etc/resolv.conf",
		"mkdir -p " + CNIBinDir + " " + CNIConfDir,
		"cp /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/portmap /usr/lib/cni/loopback " + CNIBinDir + "/",
		"cp etc/" + ConflistName + " " + CNIConfDir + "/" + ConflistName,
		"sysctl -qw net.ipv4.ip_forward=1",
		"[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || sysctl -qw net.bridge.bridge-nf-call-iptables=1",
	}, "\n")
	_, err := n.ns.run(ctx, "sh", "-c", script)
	return err
}

func (n *Node) spawn(name, bin string, args ...string) error {
	cmd, err := n.ns.start(name, bin, args...)
	if err != nil {
		return err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	n.procs = append(n.procs, p)
	go func() { _ = cmd.Wait(); close(p.done) }()
	return nil
}

// Exec runs a command inside the node (its mount, network and UTS
// namespaces) and returns its combined output.
func (n *Node) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return n.ns.run(ctx, name, args...)
}

// Command returns a command that runs inside the node, for callers that
// need its pipes.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return n.ns.command(ctx, name, args...)
}

// NetNS is the path of the node's network namespace.
func (n *Node) NetNS() string { return n.ns.NetNS() }

// DialContext connects to an address as seen from inside the node (a pod
// IP, a Service's cluster IP, the node's loopback), for an http.Transport
// or a gRPC dialer.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, n.ns.NetNS(), network, addr)
}

// ImportImages imports OCI image-layout tars into containerd's k8s.io namespace.
func (n *Node) ImportImages(ctx context.Context, tars ...string) error {
	for _, t := range tars {
		abs, err := filepath.Abs(t)
		if err != nil {
			return err
		}
		if _, err := n.ns.run(ctx, "ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import", "--no-unpack=false", abs); err != nil {
			return fmt.Errorf("import image %s: %w", t, err)
		}
	}
	return nil
}

// Stop tears the node down: every process it started (containers too),
// its cgroups, and its directory if Start made it. Safe to call twice.
func (n *Node) Stop() {
	if n.relay != nil {
		n.relay.Close()
		n.relay = nil
	}
	if n.ns != nil {
		n.ns.close()
		n.ns = nil
	}
	n.procs = nil
	if n.ownsDir && n.Dir != "" {
		for i := 0; i < 50; i++ {
			if err := os.RemoveAll(n.Dir); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond) // the namespace's mounts are still being released
		}
	}
}

// Log returns a component's log ("kubelet", "containerd", ...).
func (n *Node) Log(component string) string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "logs", component+".log"))
	return string(b)
}

func (n *Node) dumpLogs(t testing.TB) {
	for _, c := range []string{"kube-apiserver", "kubelet", "containerd", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns"} {
		t.Logf("--- %s log (tail) ---\n%s", c, tail(n.Log(c), 4000))
	}
}

func (n *Node) waitAPI(ctx context.Context) error {
	return Poll(ctx, "kube-apiserver ready", func() (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		b, err := n.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok", nil
	})
}

func (n *Node) waitContainerd(ctx context.Context) error {
	return Poll(ctx, "containerd up", func() (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		_, err := n.ns.run(ctx, "ctr", "--address", "/run/containerd/containerd.sock", "version")
		return err == nil, nil
	})
}

// waitDNS waits for CoreDNS's ready plugin: its kubernetes plugin has
// synced (before that it answers SERVFAIL).
func (n *Node) waitDNS(ctx context.Context) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: n.DialContext}, Timeout: 2 * time.Second}
	return Poll(ctx, "CoreDNS ready", func() (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		resp, err := hc.Get("http://127.0.0.1:8181/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// waitReady waits for the Node object to report Ready.
func (n *Node) waitReady(ctx context.Context) error {
	return Poll(ctx, "node Ready", func() (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// exited reports a component that has stopped.
func (n *Node) exited() error {
	for _, p := range n.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%s); its log ends:\n%s", p.name, p.cmd.ProcessState, tail(n.Log(p.name), 3000))
		default:
		}
	}
	return nil
}

// Poll runs check every 100 ms until it says done, fails, or ctx ends; the
// error then names what was awaited. It is for waiting on a cluster's state
// from outside (the API has no event for "a node is Ready" that a caller
// could wait on more cheaply at this scale).
func Poll(ctx context.Context, what string, check func() (bool, error)) error {
	for {
		ok, err := check()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PodNetExec runs a command inside the node in a pod's network namespace
// (found through the pod's cgroup), with the node's tools: iptables-save
// there shows what istio-init or the CNI plugin installed.
func (n *Node) PodNetExec(ctx context.Context, podUID string, name string, args ...string) ([]byte, error) {
	pid, err := n.ns.cg.podPID(podUID)
	if err != nil {
		return nil, err
	}
	return n.ns.run(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "--", name}, args...)...)
}
