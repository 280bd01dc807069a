// Package lab builds a small mesh out of network namespaces for the
// end-to-end test and the demo: a "node" namespace holding a bridge, "pods"
// joined to it by veths, and processes started inside them. Close removes
// every namespace, link, file and process it made.
package lab

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NS is a named network namespace.
type NS struct {
	Name string
	Path string
}

// Pod is a namespace on the lab's bridge.
type Pod struct {
	NS
	IP netip.Addr
}

// Lab is a set of namespaces and processes.
type Lab struct {
	// Dir holds binaries, logs and per-pod files; removed by Close.
	Dir string
	// Bin holds the built binaries.
	Bin string
	// Node holds the bridge; Gateway is its address, reachable from every pod.
	Node    *NS
	Gateway netip.Addr
	// Log receives each process's output, line by line, prefixed with its name.
	Log io.Writer

	id      string
	bridge  string
	mu      sync.Mutex
	pods    []*Pod
	procs   []*Proc
	nextIP  netip.Addr
	nsNames []string
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New makes a lab: a node namespace with a bridge on subnet (e.g. "10.44.0.0/24").
func New(subnet string, log io.Writer) (*Lab, error) {
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return nil, fmt.Errorf("lab subnet %q: %w", subnet, err)
	}
	dir, err := os.MkdirTemp("", "skiff-lab-")
	if err != nil {
		return nil, err
	}
	// Pods' processes run as the proxy user and reach their files under it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	l := &Lab{Dir: dir, Bin: filepath.Join(dir, "bin"), Log: log, id: randomID()}
	l.Gateway = p.Addr().Next()
	l.nextIP = l.Gateway.Next()
	l.bridge = "skbr" + l.id
	node, err := l.newNS("node")
	if err != nil {
		l.Close()
		return nil, err
	}
	l.Node = node
	steps := [][]string{
		{"ip", "-n", node.Name, "link", "add", l.bridge, "type", "bridge"},
		{"ip", "-n", node.Name, "addr", "add", fmt.Sprintf("%s/%d", l.Gateway, p.Bits()), "dev", l.bridge},
		{"ip", "-n", node.Name, "link", "set", l.bridge, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Lab) newNS(role string) (*NS, error) {
	name := fmt.Sprintf("skiff-%s-%s", role, l.id)
	if err := run("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.nsNames = append(l.nsNames, name)
	l.mu.Unlock()
	if err := run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	return &NS{Name: name, Path: "/run/netns/" + name}, nil
}

// AddPod makes a pod namespace on the bridge with the next free address, a
// default route through the node, and its own resolv.conf (nameserver: the
// node, search: the namespace's Kubernetes domains).
func (l *Lab) AddPod(name, namespace string) (*Pod, error) {
	ns, err := l.newNS(name)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	ip := l.nextIP
	l.nextIP = ip.Next()
	n := len(l.pods)
	l.mu.Unlock()
	host, peer := fmt.Sprintf("skh%s%d", l.id, n), fmt.Sprintf("skp%s%d", l.id, n)
	steps := [][]string{
		{"ip", "link", "add", host, "netns", l.Node.Name, "type", "veth", "peer", "name", peer, "netns", ns.Name},
		{"ip", "-n", l.Node.Name, "link", "set", host, "master", l.bridge, "up"},
		{"ip", "-n", ns.Name, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", ns.Name, "addr", "add", ip.String() + "/24", "dev", "eth0"},
		{"ip", "-n", ns.Name, "link", "set", "eth0", "up"},
		{"ip", "-n", ns.Name, "route", "add", "default", "via", l.Gateway.String()},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return nil, err
		}
	}
	etc := filepath.Join("/etc/netns", ns.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return nil, err
	}
	resolv := fmt.Sprintf("nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", l.Gateway, namespace)
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		return nil, err
	}
	p := &Pod{NS: *ns, IP: ip}
	l.mu.Lock()
	l.pods = append(l.pods, p)
	l.mu.Unlock()
	return p, nil
}

// Proc is a process the lab started.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Wait waits for the process to exit.
func (p *Proc) Wait() error { <-p.done; return p.err }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start runs a command inside ns (nil: the host) as uid (0: root), in dir,
// with env added to a minimal environment. Its output goes to the lab log.
func (l *Lab) Start(name string, ns *NS, uid int, dir string, env []string, bin string, args ...string) (*Proc, error) {
	argv := []string{}
	if ns != nil {
		argv = append(argv, "ip", "netns", "exec", ns.Name)
	}
	if uid != 0 {
		argv = append(argv, "setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups")
	}
	argv = append(argv, bin)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(l.Log, "  [%s] %s\n", name, sc.Text())
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	return p, nil
}

// Stop ends a process: SIGTERM to its group, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Close stops every process (newest first) and removes every namespace and file.
func (l *Lab) Close() error {
	l.mu.Lock()
	procs, names := l.procs, l.nsNames
	l.procs, l.nsNames = nil, nil
	l.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(5 * time.Second)
	}
	var errs []error
	for i := len(names) - 1; i >= 0; i-- {
		if err := run("ip", "netns", "del", names[i]); err != nil {
			errs = append(errs, err)
		}
		_ = os.RemoveAll(filepath.Join("/etc/netns", names[i]))
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Residue lists namespaces named like this lab's that still exist (for tests).
func (l *Lab) Residue() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], "-"+l.id) {
			left = append(left, f[0])
		}
	}
	return left
}

// Build compiles packages (import paths relative to the module root, e.g.
// "./cmd/istiod") into Bin, from the module root root.
func (l *Lab) Build(root string, pkgs ...string) error {
	args := append([]string{"build", "-o", l.Bin + "/"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, out)
	}
	return nil
}

func runOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// chownR gives a tree to uid (and the same gid).
func chownR(root string, uid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// GoBuild builds one package into out with extra build flags.
func GoBuild(root, out, pkg string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// ProcessResidue lists running processes started from the lab's binaries (for tests).
func (l *Lab) ProcessResidue() []string {
	var left []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), l.Bin) {
			left = append(left, d.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}
