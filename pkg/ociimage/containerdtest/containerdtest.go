// Package containerdtest starts a private containerd for tests that import
// and run images: Debian's containerd, ctr and runc, with a root, state and
// socket of its own under a temporary directory, inside a private mount
// namespace whose /run is a tmpfs (containerd 1.6 puts shim sockets under
// /run/containerd whatever its configuration says). Nothing it does is seen
// outside that directory and namespace, and t.Cleanup stops every process it
// started, containers and shims included.
package containerdtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// Namespace is the containerd namespace images are imported into: the one
// the kubelet's CRI uses, so that what a test sees matches a node.
const Namespace = "k8s.io"

// Containerd is a running private containerd.
type Containerd struct {
	// Dir holds the configuration, root, state, socket and log.
	Dir string
	// Address is the gRPC socket.
	Address string
	cmd     *exec.Cmd
	exited  chan struct{}
	// mntNS names containerd's mount namespace ("mnt:[inode]"); mntHold
	// keeps that namespace alive until stop has looked for leftovers. A
	// namespace's inode number is reused by the next namespace made once
	// the last holder is gone, which is as soon as containerd and its
	// shims exit: without the hold, the scan would find and kill
	// processes of a namespace made since, such as another test's
	// `ip netns exec`.
	mntNS   string
	mntHold *os.File
	runs    atomic.Int64
}

// config is the daemon's configuration: the CRI plugin is off (ctr needs
// none of it), everything lives under dir.
const config = `version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.sock.ttrpc"
`

// Start starts containerd and registers its teardown with t.Cleanup. It
// skips when not root and fails when containerd, ctr, runc, unshare or
// nsenter is missing (`make deps` installs them).
func Start(t testing.TB) *Containerd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	for _, b := range []string{"containerd", "ctr", "runc", "unshare", "nsenter", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s not found (make deps installs containerd and runc): %v", b, err)
		}
	}
	// A short path: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{Dir: dir, Address: filepath.Join(dir, "containerd.sock")}
	t.Cleanup(func() {
		c.stop(t)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove containerd dir: %v", err)
		}
	})
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// unshare and sh exec in turn, so the pid is containerd's.
	c.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount -t tmpfs -o mode=0755 tmpfs /run && exec containerd --config "$1"`, "sh", cfg)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = sysProcAttr()
	c.exited = make(chan struct{})
	exited := c.exited
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the starting thread ends: this goroutine
		// holds its thread until containerd exits, so the signal comes only
		// when the test process dies.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		c.exited = nil
		t.Fatalf("start containerd: %v", err)
	}
	ready := polltest.Wait(polltest.Timeout, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		if _, err := os.Stat(c.Address); err != nil {
			return false
		}
		_, err := c.Ctr(context.Background(), "version")
		return err == nil
	})
	select {
	case <-exited:
		t.Fatalf("containerd exited at start:\n%s", c.Log())
	default:
	}
	if !ready {
		t.Fatalf("containerd not serving %s after %v:\n%s", c.Address, polltest.Timeout, c.Log())
	}
	if c.mntHold, err = os.Open(fmt.Sprintf("/proc/%d/ns/mnt", c.cmd.Process.Pid)); err != nil {
		t.Fatalf("containerd's mount namespace: %v", err)
	}
	if c.mntNS, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", c.mntHold.Fd())); err != nil {
		t.Fatalf("containerd's mount namespace: %v", err)
	}
	return c
}

// Log is what containerd has logged so far.
func (c *Containerd) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	return string(b)
}

// Ctr runs ctr against this containerd in Namespace, inside containerd's
// mount namespace (where the I/O FIFOs of `ctr run` must be), and returns
// its stdout; an error carries stderr.
func (c *Containerd) Ctr(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	if err := c.ctr(ctx, &stdout, &stderr, args...); err != nil {
		return stdout.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (c *Containerd) ctr(ctx context.Context, stdout, stderr io.Writer, args ...string) error {
	full := append([]string{"-t", fmt.Sprint(c.cmd.Process.Pid), "--mount", "--",
		"ctr", "--address", c.Address, "--namespace", Namespace}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
}

// Import imports an image tar (docker or OCI layout) and unpacks it.
func (c *Containerd) Import(ctx context.Context, tarPath string) error {
	_, err := c.Ctr(ctx, "images", "import", tarPath)
	return err
}

// Images lists the names of the images in Namespace.
func (c *Containerd) Images(ctx context.Context) ([]string, error) {
	out, err := c.Ctr(ctx, "images", "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Run is one container run by Containerd.Run. It runs as the image's
// User (ctr 1.6 has no flag to change it).
type Run struct {
	// Image is the image's full name.
	Image string
	// Args replace the image's command (entrypoint and cmd); empty runs
	// the image's own.
	Args []string
	// Privileged gives the container every capability (it still has its
	// own network namespace, so iptables in it touch nothing outside).
	Privileged bool
	// CapAdd are capabilities added to the default set, e.g. "CAP_NET_ADMIN".
	CapAdd []string
	// ReadOnly mounts the root file system read-only.
	ReadOnly bool
}

// Run runs a container to completion with `ctr run --rm` and returns its
// output, stdout and stderr interleaved (with ctr's own errors). An error
// carries that output. The container is removed even when ctx
// ends first.
func (c *Containerd) Run(ctx context.Context, r Run) (string, error) {
	id := fmt.Sprintf("run-%d", c.runs.Add(1))
	args := []string{"run", "--rm", "--cgroup", ""}
	if r.Privileged {
		args = append(args, "--privileged")
	}
	for _, c := range r.CapAdd {
		args = append(args, "--cap-add", c)
	}
	if r.ReadOnly {
		args = append(args, "--read-only")
	}
	args = append(args, r.Image, id)
	args = append(args, r.Args...)
	var out bytes.Buffer
	if err := c.ctr(ctx, &out, &out, args...); err != nil {
		c.remove(id)
		return out.String(), fmt.Errorf("ctr %s: %w\noutput: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// remove kills and deletes container id, if it is still there.
func (c *Containerd) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	c.Ctr(ctx, "tasks", "delete", "--force", id)
	c.Ctr(ctx, "containers", "delete", id)
}

// stop removes leftover containers, stops containerd, and kills whatever
// still runs in its mount namespace (shims) and their children.
func (c *Containerd) stop(t testing.TB) {
	if c.exited == nil {
		return
	}
	if c.mntHold != nil {
		defer c.mntHold.Close()
	}
	if c.mntNS != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, _ := c.Ctr(ctx, "containers", "list", "--quiet")
		cancel()
		for _, id := range strings.Fields(out) {
			c.remove(id)
		}
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Logf("containerdtest: containerd ignored SIGTERM for 10s; killing it")
		c.cmd.Process.Kill()
		<-c.exited
	}
	if c.mntNS == "" {
		return
	}
	for _, pid := range inNamespace(c.mntNS) {
		t.Logf("containerdtest: killing leftover process %d", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
