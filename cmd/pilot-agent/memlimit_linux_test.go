package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// memoryCgroup makes a memory cgroup limited to limit bytes (v1, else v2 at
// the root) and removes it when the test ends; it skips when there is none.
func memoryCgroup(t *testing.T, limit string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "skiff-memtest-" + hex.EncodeToString(b)
	var dir, file string
	switch {
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		dir, file = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	case strings.Contains(read("/sys/fs/cgroup/cgroup.subtree_control"), "memory"):
		dir, file = filepath.Join("/sys/fs/cgroup", name), "memory.max"
	default:
		t.Skip("no memory cgroup controller to use")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(limit), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func read(p string) string { b, _ := os.ReadFile(p); return string(b) }

// TestMemoryLimitFromTheCgroup runs pilot-agent in a cgroup limited to
// 256 MiB: it sets a soft memory limit of 90% of that unless GOMEMLIMIT is
// set, and turns the heap releases off with GOGC=off. The agent then
// stops (no root certificate here); its first log lines say what it did.
func TestMemoryLimitFromTheCgroup(t *testing.T) {
	cg := memoryCgroup(t, "268435456")
	bin := filepath.Join(t.TempDir(), "pilot-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{nil, []string{"memory_limit_bytes=241591910", "release_after_updates=true"}},
		{[]string{"GOMEMLIMIT=100MiB"}, []string{"memory_limit_bytes=0", "GOMEMLIMIT=100MiB set by the user", "release_after_updates=true"}},
		{[]string{"GOGC=off"}, []string{"memory_limit_bytes=241591910", "release_after_updates=false"}},
	} {
		// The shell moves itself into the cgroup, then becomes the agent.
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" proxy sidecar`, "sh", cg, bin)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, c.env...)
		cmd.Dir = t.TempDir()
		out, _ := cmd.CombinedOutput()
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, `msg="Go heap"`) {
				line = l
			}
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("env %q: the Go heap log line %q lacks %q; output:\n%s", c.env, line, w, out)
			}
		}
	}
}
