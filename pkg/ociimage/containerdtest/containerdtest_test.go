package containerdtest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestLeftoverScanSparesLaterNamespaces stops containerd as stop does and
// then makes a mount namespace, as another test's `ip netns exec` does at
// any moment. The kernel hands a freed namespace's inode number to the
// next namespace made, so unless containerd's namespace is still held the
// new one takes its name and the scan for leftovers would kill its
// process.
func TestLeftoverScanSparesLaterNamespaces(t *testing.T) {
	c := Start(t)
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(polltest.Timeout):
		t.Fatal("containerd ignored SIGTERM")
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("unshare", "--mount", "--", "sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	var ns string
	polltest.Until(t, "unshare to make its namespace", func() bool {
		ns, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", other.Process.Pid))
		return ns != "" && ns != own
	})
	if ns == c.mntNS {
		t.Fatalf("a namespace made after containerd exited is named %s, as containerd's was", ns)
	}
	if slices.Contains(inNamespace(c.mntNS), other.Process.Pid) {
		t.Fatalf("the scan for containerd's leftovers lists pid %d, of a namespace made after it exited", other.Process.Pid)
	}
}
