package kubenode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// namespace is the node's private mount+net+uts namespace, held open by a
// sleeping process.
type namespace struct {
	dir    string
	holder *exec.Cmd
	stdin  io.WriteCloser // closing it makes the holder reap
	done   chan struct{}  // closed when the holder has exited
	cg     *cgroups
}

// holderScript prepares the namespace (a private /run, overlays whose
// upper layers are in dir, the kubelet's sysctls, the hostname, loopback and
// the veth that carries the node address), says "ready", and then waits
// for its stdin to close: when Stop closes it, or when the process that
// started the node dies however it dies. It then reaps: every process in
// the node's cgroups is killed, the cgroups and the namespace's mounts are
// removed, and with removeDir the directory too.
func holderScript(dir, hostname, nodeCIDR, gateway string, cg *cgroups, removeDir bool) string {
	var b strings.Builder
	b.WriteString("set -e\nmount -t tmpfs -o mode=755 tmpfs /run\n")
	for _, d := range overlayDirs {
		up := filepath.Join(dir, "fs", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
		fmt.Fprintf(&b, "mkdir -p %s/upper %s/work\nmount -t overlay overlay -o lowerdir=%s,upperdir=%s/upper,workdir=%s/work %s\n", up, up, d, up, up, d)
	}
	// The kubelet sets these host-wide sysctls to its liking; inside the node
	// it sees files of its own instead.
	for _, path := range sortedKeys(kubeletSysctls) {
		f := filepath.Join(dir, "fs", "sysctl-"+strings.ReplaceAll(path, "/", "-"))
		fmt.Fprintf(&b, "echo %s > %s\nmount --bind %s /proc/sys/%s\n", kubeletSysctls[path], f, f, path)
	}
	fmt.Fprintf(&b, "hostname %s\nip link set lo up\n", hostname)
	fmt.Fprintf(&b, "ip link add node0 type veth peer name node1\nip addr add %s dev node0\nip link set node0 up\nip link set node1 up\n", nodeCIDR)
	fmt.Fprintf(&b, "ip route add default via %s dev node0 onlink\n", gateway)
	b.WriteString("echo ready\nset +e\nread -r _\n")
	var procs, dirs []string
	for _, h := range cg.hiers {
		procs = append(procs, filepath.Join(h, cg.name))
	}
	fmt.Fprintf(&b, "for i in $(seq 200); do p=$(find %s -name cgroup.procs -exec cat {} + 2>/dev/null); [ -z \"$p\" ] && break; kill -9 $p 2>/dev/null; sleep 0.05; done\n", strings.Join(procs, " "))
	dirs = procs
	fmt.Fprintf(&b, "for i in $(seq 50); do find %s -depth -type d -exec rmdir {} + 2>/dev/null && break; sleep 0.05; done\n", strings.Join(dirs, " "))
	b.WriteString("umount -R -l /run /var/log /var/lib /opt /etc 2>/dev/null\n")
	if removeDir {
		fmt.Fprintf(&b, "cd / && rm -rf %s\n", dir)
	}
	return b.String()
}

// kubeletSysctls are the kernel settings the kubelet wants, with the values
// it wants (pkg/kubelet/cm setupKernelTunables); it would otherwise change
// them for the whole machine.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10", "kernel/panic_on_oops": "1",
	"kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000",
}

// overlayDirs are the host directories the node writes to; each gets an
// overlay so its writes stay in the node's directory.
var overlayDirs = []string{"/etc", "/opt", "/var/lib", "/var/log"}

func newNamespace(dir, hostname, nodeCIDR, gateway string, removeDir bool) (*namespace, error) {
	cg, err := newCgroups("skiff-" + filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	ns := &namespace{dir: dir, cg: cg, done: make(chan struct{})}
	cmd := exec.Command("unshare", "--mount", "--net", "--uts", "--propagation", "private", "--",
		"sh", "-c", holderScript(dir, hostname, nodeCIDR, gateway, cg, removeDir))
	var stderr bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		ns.stdin, err = cmd.StdinPipe()
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	cmd.Stderr = &stderr
	// Its own process group: a Ctrl-C meant for the caller must not kill
	// the reaper before it reaps.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		cg.remove()
		return nil, fmt.Errorf("start namespace holder: %w", err)
	}
	ns.holder = cmd
	line := make([]byte, 6)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		_ = cmd.Wait()
		close(ns.done)
		cg.remove()
		return nil, fmt.Errorf("node namespace setup failed: %s", strings.TrimSpace(stderr.String()))
	}
	go func() { _ = cmd.Wait(); close(ns.done) }()
	return ns, nil
}

// NetNS is the path of the node's network namespace.
func (ns *namespace) NetNS() string {
	return "/proc/" + strconv.Itoa(ns.holder.Process.Pid) + "/ns/net"
}

// command returns cmd run inside the namespace with its working directory
// at dir (relative paths then mean the same inside and out).
func (ns *namespace) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := append([]string{"-t", strconv.Itoa(ns.holder.Process.Pid), "-m", "-n", "-u", "--wd=" + ns.dir, "--", name}, args...)
	var cmd *exec.Cmd
	if ctx != nil {
		cmd = exec.CommandContext(ctx, "nsenter", full...)
	} else {
		cmd = exec.Command("nsenter", full...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs a command in the namespace and returns its combined output.
func (ns *namespace) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := ns.command(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// start starts a long-running process in the namespace, logging to
// dir/logs/NAME.log, inside the node's cgroup so Stop finds its children.
func (ns *namespace) start(name, bin string, args ...string) (*exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Join(ns.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(ns.dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := ns.command(nil, bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close()
	if err := ns.cg.add(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// close has the holder reap (kill everything in the node's cgroups: the
// components, containerd's shims, the containers; remove the cgroups and
// the mounts), waits for it, and removes what is left of the cgroups.
func (ns *namespace) close() {
	_ = ns.stdin.Close()
	select {
	case <-ns.done:
	case <-time.After(30 * time.Second):
		_ = ns.holder.Process.Kill()
		<-ns.done
	}
	ns.cg.killAll(10 * time.Second)
	ns.cg.remove()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
