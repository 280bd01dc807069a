package kubenode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	cg     *cgroups
}

// mountScript prepares the namespace before the holder sleeps: a private
// /run, overlays whose upper layers are in dir, the node's hostname and
// loopback, and the veth that carries the node address.
func mountScript(dir, hostname, nodeCIDR, gateway string) string {
	var b strings.Builder
	b.WriteString("set -e\nmount --make-rprivate /\nmount -t tmpfs -o mode=755 tmpfs /run\n")
	for _, d := range overlayDirs {
		up := filepath.Join(dir, "fs", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
		fmt.Fprintf(&b, "mkdir -p %s/upper %s/work\nmount -t overlay overlay -o lowerdir=%s,upperdir=%s/upper,workdir=%s/work %s\n", up, up, d, up, up, d)
	}
	// The kubelet sets these host-wide sysctls to its liking; inside the node
	// it sees files of its own instead.
	for path, v := range kubeletSysctls {
		f := filepath.Join(dir, "fs", "sysctl-"+strings.ReplaceAll(path, "/", "-"))
		fmt.Fprintf(&b, "echo %s > %s\nmount --bind %s /proc/sys/%s\n", v, f, f, path)
	}
	fmt.Fprintf(&b, "hostname %s\nip link set lo up\n", hostname)
	fmt.Fprintf(&b, "ip link add node0 type veth peer name node1\nip addr add %s dev node0\nip link set node0 up\nip link set node1 up\n", nodeCIDR)
	fmt.Fprintf(&b, "ip route add default via %s dev node0 onlink\n", gateway)
	b.WriteString("echo ready\nexec sleep infinity\n")
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

func newNamespace(dir, hostname, nodeCIDR, gateway string) (*namespace, error) {
	cg, err := newCgroups("skiff-" + filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	ns := &namespace{dir: dir, cg: cg}
	cmd := exec.Command("unshare", "--mount", "--net", "--uts", "--propagation", "private", "--",
		"sh", "-c", mountScript(dir, hostname, nodeCIDR, gateway))
	var stderr bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cg.remove()
		return nil, err
	}
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cg.remove()
		return nil, fmt.Errorf("start namespace holder: %w", err)
	}
	ns.holder = cmd
	if err := cg.add(cmd.Process.Pid); err != nil {
		ns.close()
		return nil, err
	}
	line := make([]byte, 6)
	if _, err := stdout.Read(line); err != nil || string(line) != "ready\n" {
		_ = cmd.Wait()
		ns.close()
		return nil, fmt.Errorf("node namespace setup failed: %s", strings.TrimSpace(stderr.String()))
	}
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

// close kills everything in the node's cgroups (the holder, the
// components, containerd's shims and the containers), then removes the
// cgroups. The namespaces and their mounts go with their last process.
func (ns *namespace) close() {
	ns.cg.killAll(10 * time.Second)
	if ns.holder != nil && ns.holder.ProcessState == nil {
		_ = ns.holder.Process.Kill()
		_ = ns.holder.Wait()
	}
	ns.cg.remove()
}
