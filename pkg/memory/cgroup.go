package memory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// unlimitedV1 is at or above what cgroup v1 reports for "no limit"
// (9223372036854771712, the largest page-aligned int64).
const unlimitedV1 = 1 << 62

// CgroupLimit returns the memory limit in bytes of the process's cgroup
// and its ancestors, the smallest set, from fsys rooted at "/" (os.DirFS("/")):
// cgroup v2's memory.max, else v1's memory.limit_in_bytes. 0 means none.
func CgroupLimit(fsys fs.FS) (int64, error) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var v1, v2 string
	hasV2 := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2, hasV2 = f[2], true
		case hasController(f[1], "memory"):
			v1 = f[2]
		}
	}
	if v1 != "" {
		return smallest(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	if hasV2 {
		return smallest(fsys, "sys/fs/cgroup", v2, "memory.max")
	}
	return 0, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// smallest reads file in the cgroup dir at cg under root and in each of
// its ancestors, and returns the smallest limit (0: none). A cgroup
// namespace shows the container's cgroup as "/", so the walk ends there.
func smallest(fsys fs.FS, root, cg, file string) (int64, error) {
	var limit int64
	for dir := path.Clean("/" + cg); ; dir = path.Dir(dir) {
		n, err := readLimit(fsys, path.Join(root, dir, file))
		if err != nil {
			return 0, err
		}
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
		if dir == "/" {
			return limit, nil
		}
	}
}

// readLimit reads one limit file: "max" or a v1 huge value is none, and
// so is a missing file (a cgroup without the memory controller).
func readLimit(fsys fs.FS, name string) (int64, error) {
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read /%s: %w", name, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/%s: %q is not a byte count", name, s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}
