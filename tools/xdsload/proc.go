package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/procfields"
)

// clockTick is USER_HZ, 100 on Linux.
const clockTick = 100

// cpuTime returns a process's user+system CPU time.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may contain spaces).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+k) * time.Second / clockTick, nil
}

// memInfo is what /proc/PID/status says of a process's memory, in bytes.
type memInfo struct {
	rss, peak  int64
	file, anon int64 // RssFile (the binary's pages) and RssAnon (heap, stacks)
}

// memory reads a process's memory.
func memory(pid int) (memInfo, error) {
	kb, err := procfields.Read(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memInfo{}, err
	}
	return memInfo{rss: int64(kb["VmRSS"]) << 10, peak: int64(kb["VmHWM"]) << 10,
		file: int64(kb["RssFile"]) << 10, anon: int64(kb["RssAnon"]) << 10}, nil
}

// loadAvg returns the 1, 5 and 15 minute load averages (zeros if unknown).
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}
