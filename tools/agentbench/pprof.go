package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

// heapProfile fetches the agent's heap profile from its status port
// (/debug/pprof/heap?gc=1: the agent collects first, so the in-use figures
// are its live heap now) into dir/name and returns `go tool pprof -top` of
// its in-use bytes.
func heapProfile(l *lab.Lab, pod *lab.NS, bin, dir, name string) (path, top string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, name)
	if out, err := l.Exec(pod, "curl", "-sf", "-o", path, "http://127.0.0.1:15020/debug/pprof/heap?gc=1"); err != nil {
		return "", "", fmt.Errorf("fetch the agent's heap profile: %w: %s", err, out)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", "-sample_index=inuse_space", bin, path).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("go tool pprof: %w: %s", err, out)
	}
	return path, strings.TrimSpace(string(out)), nil
}
