package kubenode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupMount = "/sys/fs/cgroup"

// cgroups is the node's own cgroup tree, NAME in every hierarchy (cgroup v1
// and the unified one): NAME/node holds the node's processes and NAME/pods
// is the kubelet's cgroupRoot.
type cgroups struct {
	name  string
	hiers []string // mounted hierarchy directories
}

func newCgroups(name string) (*cgroups, error) {
	ents, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	cg := &cgroups{name: name}
	for _, e := range ents {
		h := filepath.Join(cgroupMount, e.Name())
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err == nil {
			cg.hiers = append(cg.hiers, h)
		}
	}
	if len(cg.hiers) == 0 {
		return nil, fmt.Errorf("cgroups: no hierarchy mounted under %s", cgroupMount)
	}
	for _, h := range cg.hiers {
		for _, sub := range []string{"", "node", "pods"} {
			d := filepath.Join(h, name, sub)
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				cg.remove()
				return nil, fmt.Errorf("cgroups: %w", err)
			}
			if strings.HasSuffix(h, "/cpuset") {
				// A v1 cpuset child takes no task until its cpus and mems are set.
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err == nil {
						err = os.WriteFile(filepath.Join(d, f), v, 0o644)
					}
					if err != nil {
						cg.remove()
						return nil, fmt.Errorf("cgroups: %s: %w", d, err)
					}
				}
			}
		}
	}
	return cg, nil
}

// PodRoot is the kubelet's cgroupRoot.
func (cg *cgroups) PodRoot() string { return "/" + cg.name + "/pods" }

// add moves a process into NAME/node in every hierarchy.
func (cg *cgroups) add(pid int) error {
	for _, h := range cg.hiers {
		f := filepath.Join(h, cg.name, "node", "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroups: add %d to %s: %w", pid, f, err)
		}
	}
	return nil
}

// pids lists every process in the tree.
func (cg *cgroups) pids() []int {
	seen := map[int]bool{}
	for _, h := range cg.hiers {
		_ = filepath.WalkDir(filepath.Join(h, cg.name), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					seen[n] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out
}

// killAll SIGKILLs every process in the tree until none is left or the
// timeout passes.
func (cg *cgroups) killAll(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		ps := cg.pids()
		if len(ps) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remove deletes the tree, deepest first, in every hierarchy.
func (cg *cgroups) remove() {
	for _, h := range cg.hiers {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, cg.name), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			for i := 0; i < 50; i++ {
				if err := os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				time.Sleep(20 * time.Millisecond) // a killed task is still leaving
			}
		}
	}
}

// podPID returns a live process of the pod with the given UID, the
// sandbox's pause if it can tell (a crash-looping container's processes
// come and go; all share the pod's network namespace).
func (cg *cgroups) podPID(uid string) (int, error) {
	want := "/pod" + uid + "/"
	var live []int
	for _, h := range cg.hiers {
		_ = filepath.WalkDir(filepath.Join(h, cg.name, "pods"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" || !strings.Contains(p, want) {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					live = append(live, n)
				}
			}
			return nil
		})
		if len(live) > 0 {
			break
		}
	}
	found := 0
	for _, pid := range live {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "pause" {
			return pid, nil
		}
		if found == 0 {
			found = pid
		}
	}
	if found == 0 {
		return 0, fmt.Errorf("no live process of pod %s in the node's cgroups", uid)
	}
	return found, nil
}
