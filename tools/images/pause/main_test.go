package main_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// start runs pause (under args' wrapper, if any) and returns the pid of
// the pause process and a channel with the wrapper's exit.
func start(t *testing.T, argv ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, done
}

// TestExitsOnSignal: pause keeps running through SIGCHLD and exits 0 on
// SIGTERM or SIGINT.
func TestExitsOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, done := start(t, bin)
			waitCaught(t, cmd.Process.Pid)
			cmd.Process.Signal(syscall.SIGCHLD)
			cmd.Process.Signal(sig)
			if err := <-done; err != nil {
				t.Fatalf("pause after %v: %v, want exit 0", sig, err)
			}
			done <- nil
		})
	}
}

// TestReapsOrphans runs pause as PID 1 of a new PID namespace, as in a pod
// sharing its process namespace, and leaves it an orphan: once the orphan
// is killed, pause reaps it (no zombie stays behind).
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	bin := build(t)
	unshare, _ := start(t, "unshare", "--pid", "--fork", "--kill-child", "--", bin)
	var pause int
	polltest.Until(t, "pause to start under unshare", func() bool {
		kids := children(unshare.Process.Pid)
		if len(kids) == 1 {
			pause = kids[0]
		}
		return pause != 0
	})
	waitCaught(t, pause)
	// The shell exits at once; its background sleep is reparented to the
	// namespace's init: pause.
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(pause), "--pid", "--",
		"sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	var orphan int
	polltest.Until(t, "the orphaned sleep to become pause's child", func() bool {
		if kids := children(pause); len(kids) == 1 {
			orphan = kids[0]
		}
		return orphan != 0
	})
	if err := syscall.Kill(orphan, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, fmt.Sprintf("pause to reap %d", orphan), func() bool { return len(children(pause)) == 0 })
}

// children lists the processes whose parent is pid (zombies included).
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	return kids
}

// waitCaught waits until pid catches SIGTERM and SIGINT (SigCgt in
// /proc/PID/status), so that a signal sent next is handled, not fatal.
func waitCaught(t *testing.T, pid int) {
	t.Helper()
	want := uint64(1)<<(syscall.SIGTERM-1) | uint64(1)<<(syscall.SIGINT-1)
	polltest.Until(t, "pause to catch SIGTERM and SIGINT", func() bool {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return false
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "SigCgt:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				return err == nil && mask&want == want
			}
		}
		return false
	})
}
