package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/procfields"
)

// memory is one reading of a process's memory, in kB.
type memory struct {
	// status: VmRSS, RssAnon, RssFile, RssShmem, Threads (a count).
	status map[string]int
	// rollup: /proc/PID/smaps_rollup (Rss, Pss, Anonymous, Private_Dirty, ...).
	rollup map[string]int
	// byMapping: resident kB per mapping name in /proc/PID/smaps ("" for
	// unnamed anonymous mappings).
	byMapping map[string]int
}

func readMemory(pid int) (memory, error) {
	var m memory
	var err error
	if m.status, err = procfields.Read(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
		return m, err
	}
	if m.rollup, err = procfields.Read(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err != nil {
		return m, err
	}
	m.byMapping, err = rssByMapping(pid)
	return m, err
}

// rssByMapping sums Rss over /proc/PID/smaps per mapping name.
func rssByMapping(pid int) (map[string]int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	name := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping header: range perms offset dev inode [name]
			name = ""
			if len(f) >= 6 {
				name = strings.Join(f[5:], " ")
			}
			continue
		}
		if f[0] == "Rss:" && len(f) >= 2 {
			n, _ := strconv.Atoi(f[1])
			out[name] += n
		}
	}
	return out, sc.Err()
}

func mb(kb int) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

// print writes the reading, with the agent binary's path shortened.
func (m memory) print(title, bin string) {
	s, r := m.status, m.rollup
	fmt.Printf("%s: VmRSS %s (RssAnon %s, RssFile %s, RssShmem %s), %d threads\n", title,
		mb(s["VmRSS"]), mb(s["RssAnon"]), mb(s["RssFile"]), mb(s["RssShmem"]), s["Threads"])
	fmt.Printf("  smaps_rollup: Rss %s, Pss %s, Anonymous %s, Private_Dirty %s, Private_Clean %s, Shared_Clean %s\n",
		mb(r["Rss"]), mb(r["Pss"]), mb(r["Anonymous"]), mb(r["Private_Dirty"]), mb(r["Private_Clean"]), mb(r["Shared_Clean"]))
	names := make([]string, 0, len(m.byMapping))
	for n := range m.byMapping {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m.byMapping[names[i]] > m.byMapping[names[j]] })
	fmt.Printf("  resident by mapping:")
	for _, n := range names {
		if m.byMapping[n] < 64 {
			continue
		}
		label := n
		switch {
		case n == bin:
			label = "binary"
		case n == "":
			label = "anonymous (unnamed)"
		}
		fmt.Printf(" %s %s;", label, mb(m.byMapping[n]))
	}
	fmt.Println()
}

// gcTrace keeps the agent's GODEBUG=gctrace=1 lines from the lab log: the
// Go runtime's own view of its heap, stacks and globals at each GC.
type gcTrace struct {
	mu    sync.Mutex
	buf   []byte
	lines []string
	// releases are the agent's "heap returned to the OS" log lines.
	releases []string
}

func (g *gcTrace) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	for {
		i := bytes.IndexByte(g.buf, '\n')
		if i < 0 {
			break
		}
		line := string(g.buf[:i])
		g.buf = g.buf[i+1:]
		if strings.Contains(line, "[productpage/agent]") && strings.Contains(line, " gc ") && strings.Contains(line, "MB goal") {
			g.lines = append(g.lines, line[strings.Index(line, "gc "):])
		}
		if i := strings.Index(line, "heap returned to the OS"); i >= 0 && strings.Contains(line, "[productpage/agent]") {
			g.releases = append(g.releases, line[i:])
		}
	}
	return len(p), nil
}

// last returns the newest gctrace line and how many there were.
func (g *gcTrace) last() (string, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.lines) == 0 {
		return "", 0
	}
	return g.lines[len(g.lines)-1], len(g.lines)
}

// released returns the agent's heap release log lines so far.
func (g *gcTrace) released() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.releases...)
}

// reset forgets the lines so far (those of earlier agent processes).
func (g *gcTrace) reset() {
	g.mu.Lock()
	g.lines, g.releases = nil, nil
	g.mu.Unlock()
}
