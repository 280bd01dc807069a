package containerdtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// inNamespace lists the processes whose mount namespace is ns (containerd's
// shims), and their descendants (containers, in namespaces of their own).
func inNamespace(ns string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	var roots []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == ns {
			roots = append(roots, pid)
		}
		if ppid, ok := parent(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	seen := map[int]bool{}
	for len(roots) > 0 {
		pid := roots[0]
		roots = roots[1:]
		if seen[pid] || pid == os.Getpid() {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		roots = append(roots, children[pid]...)
	}
	return out
}

// parent reads a process's parent pid from /proc/PID/stat.
func parent(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name is in parentheses and may hold spaces: the fields
	// after the last ')' are state, ppid, ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
