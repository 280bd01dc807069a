package dnsproxy

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestThroughIptablesCapture runs the proxy as uid 1337 in a pod-like
// network namespace whose DNS is captured by istio-iptables --redirect-dns,
// with a real nameserver (dnsmasq) in a second namespace as the resolv.conf
// server. An app's queries to that server land on the proxy; the proxy's
// own upstream queries, made as uid 1337, reach the nameserver uncaptured.
func TestThroughIptablesCapture(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, tool := range []string{"dig", "dnsmasq", "setpriv", "iptables", "go"} {
		requireTool(t, tool)
	}
	iptablesBin := buildIstioIptables(t)
	helper := shareableCopy(t)

	pod, dnsNS := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, pod, dnsNS, "10.53.0.1/24", "10.53.0.2/24")
	pod.SetResolvConf(t, "nameserver 10.53.0.2\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n")

	// The cluster's nameserver: knows ext.test, nothing of the mesh.
	queryLog := filepath.Join(filepath.Dir(helper), "dnsmasq.log")
	startIn(t, dnsNS, "", "dnsmasq", append([]string{"--no-daemon", "--port=53", "--listen-address=10.53.0.2",
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--pid-file=", "--user=root",
		"--log-queries", "--log-facility=" + queryLog, "--local=/local/"}, dnsmasqRecords()...)...)
	polltest.Until(t, "dnsmasq", func() bool {
		return exec.Command("ip", "netns", "exec", dnsNS.Name, "dig", "+time=1", "+tries=1", "@10.53.0.2", "ext.test").Run() == nil
	})

	out := pod.Exec(t, iptablesBin, "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
		"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--redirect-dns")
	t.Logf("istio-iptables:\n%s", out)

	// The proxy, as the proxy user, reading the pod's resolv.conf.
	tablePath := filepath.Join(filepath.Dir(helper), "table.json")
	b, err := json.Marshal(testTable())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tablePath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	startIn(t, pod, "127.0.0.1:15053 /etc/resolv.conf "+tablePath, "setpriv",
		"--reuid=1337", "--regid=1337", "--clear-groups", helper)

	app := func(args ...string) string {
		t.Helper()
		return pod.Exec(t, "setpriv", append([]string{"--reuid=1000", "--regid=1000", "--clear-groups",
			"dig", "+time=3", "+tries=1"}, args...)...)
	}
	for _, transport := range []string{"+notcp", "+tcp"} {
		// A mesh name only the proxy knows: the app's query to the
		// resolv.conf server was captured.
		if out := app(transport, "reviews.default.svc.cluster.local", "A"); !strings.Contains(out, "10.0.0.1") {
			t.Errorf("mesh name over %s not answered by the proxy:\n%s", transport, out)
		}
		// A name only the nameserver knows: the proxy forwarded it, as uid
		// 1337, and that query was not captured back to itself.
		if out := app(transport, "ext.test", "A"); !strings.Contains(out, "192.0.2.7") {
			t.Errorf("forwarded name over %s:\n%s", transport, out)
		}
	}
	if out := app("+search", "reviews", "A"); !strings.Contains(out, "10.0.0.1") {
		t.Errorf("search-list walk through the capture:\n%s", out)
	}
	// The proxy's uid is exempt: the same mesh query made as 1337 goes to
	// the nameserver, which does not know it.
	direct := pod.Exec(t, "setpriv", "--reuid=1337", "--regid=1337", "--clear-groups",
		"dig", "+time=3", "+tries=1", "reviews.default.svc.cluster.local", "A")
	if strings.Contains(direct, "10.0.0.1") || !strings.Contains(direct, "NXDOMAIN") {
		t.Errorf("a query as uid 1337 should bypass the proxy:\n%s", direct)
	}

	logText := readFileEventually(t, queryLog, "ext.test")
	if !strings.Contains(logText, "query[A] ext.test from 10.53.0.1") {
		t.Errorf("nameserver never saw the forwarded query:\n%s", logText)
	}
	if strings.Contains(logText, "query[A] reviews.default.svc.cluster.local.default") {
		t.Errorf("search-list expansions leaked past the proxy:\n%s", logText)
	}
}

// buildIstioIptables builds cmd/istio-iptables from this module.
func buildIstioIptables(t *testing.T) string {
	t.Helper()
	modFile, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(modFile)))
	if _, err := os.Stat(filepath.Join(root, "cmd/istio-iptables/main.go")); err != nil {
		t.Skip("cmd/istio-iptables not in this tree")
	}
	bin := filepath.Join(t.TempDir(), "istio-iptables")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/istio-iptables")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build istio-iptables: %v\n%s", err, out)
	}
	return bin
}

// shareableCopy copies this test binary into a directory the proxy user
// can read, and returns the copy's path.
func shareableCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dnsproxy-capture")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(dir, "dnsproxy.test")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// startIn starts a long-running command in ns, with helperEnv set to
// helper when not empty, and stops it at cleanup. A helper proxy must print
// "ready" before startIn returns.
func startIn(t *testing.T, ns *netnstest.NS, helper string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Stderr = tWriter{t}
	var stdout io.ReadCloser
	if helper != "" {
		cmd.Env = append(os.Environ(), helperEnv+"="+helper)
		var err error
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	if stdout == nil {
		go func() { _ = cmd.Wait(); close(done) }()
		return
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s exited before it was ready", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not ready after 10s", name)
	}
}

// readFileEventually returns the file's content once it contains want, or
// whatever it holds after 3 s.
func readFileEventually(t *testing.T, path, want string) string {
	t.Helper()
	var b []byte
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ = os.ReadFile(path)
		if strings.Contains(string(b), want) {
			break
		}
	}
	return string(b)
}
