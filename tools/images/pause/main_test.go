package main_test

import (
	"fmt"
	"io"
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

// proc is a started process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// start runs argv; when argv is pause itself, it waits until pause has
// closed its stdout: it handles signals from then on. (A wrapper such as
// unshare keeps its own copy of stdout open.)
func start(t *testing.T, argv ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wrapped := filepath.Base(argv[0]) != "pause"
	if !wrapped {
		p.cmd.Stdout = w
	}
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	if !wrapped {
		if _, err := io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestExitsOnSignal: pause keeps running through SIGCHLD and exits 0 on
// SIGTERM or SIGINT.
func TestExitsOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := start(t, bin)
			p.cmd.Process.Signal(syscall.SIGCHLD)
			p.cmd.Process.Signal(sig)
			<-p.done
			if p.err != nil {
				t.Fatalf("pause after %v: %v, want exit 0", sig, p.err)
			}
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
	unshare := start(t, "unshare", "--pid", "--fork", "--kill-child", "--", bin)
	var pause int
	polltest.Until(t, "pause to start under unshare", func() bool {
		kids := children(unshare.cmd.Process.Pid)
		if len(kids) == 1 {
			pause = kids[0]
		}
		return pause != 0
	})
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
