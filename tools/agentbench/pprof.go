package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// memStats fetches the agent's runtime.MemStats, as the heap profile's
// text form ends with them (/debug/pprof/heap?debug=1 runs no GC), and
// returns the lines that split its memory: heap in use, idle and released,
// stacks, span and GC metadata, the rest.
func memStats(l *lab.Lab, pod *lab.NS) (string, error) {
	out, err := l.Get(pod, "http://127.0.0.1:15020/debug/pprof/heap?debug=1")
	if err != nil {
		return "", fmt.Errorf("fetch the agent's MemStats: %w", err)
	}
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[2] != "=" {
			continue
		}
		switch f[1] {
		case "Sys", "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "Stack", "MSpan", "MCache", "BuckHashSys", "GCSys", "OtherSys", "NextGC", "NumGC", "NumForcedGC":
			n, _ := strconv.ParseUint(f[3], 10, 64)
			if strings.HasPrefix(f[1], "Num") {
				keep = append(keep, fmt.Sprintf("%s %d", f[1], n))
			} else {
				keep = append(keep, fmt.Sprintf("%s %.1f MB", f[1], float64(n)/(1<<20)))
			}
		}
	}
	return strings.Join(keep, ", "), nil
}
