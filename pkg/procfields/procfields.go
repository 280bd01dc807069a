// Package procfields reads the "Key: N [kB]" lines of Linux /proc files
// (/proc/PID/status, /proc/PID/smaps_rollup, /proc/meminfo): the figures
// the benchmarks report of a process's memory.
package procfields

import (
	"os"
	"strconv"
	"strings"
)

// Read returns the first number of each "Key: N" line of the file at path,
// by key without its colon ("VmRSS" -> its kB). Lines of another shape are
// skipped.
func Read(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b)), nil
}

// Parse is Read on text already read.
func Parse(text string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		if n, err := strconv.Atoi(f[1]); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = n
		}
	}
	return out
}
