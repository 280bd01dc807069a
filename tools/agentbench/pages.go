package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// residentPages returns, for each page of the binary that process pid has
// mapped (present in its page table: faulted in, or mapped around a fault),
// its virtual address. Read from /proc/PID/pagemap (root only).
func residentPages(pid int, bin string) (map[uint64]bool, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	out := map[uint64]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(maps)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != bin {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		buf := make([]byte, (end-start)/4096*8)
		if _, err := pm.ReadAt(buf, int64(start/4096*8)); err != nil {
			return nil, fmt.Errorf("read pagemap: %w", err)
		}
		for i := 0; i < len(buf); i += 8 {
			if binary.LittleEndian.Uint64(buf[i:])&(1<<63) != 0 {
				out[start+uint64(i/8)*4096] = true
			}
		}
	}
	return out, sc.Err()
}

// pageReport prints the binary's resident pages by ELF section, and the
// resident text by package, from twin (the same build unstripped: its text
// is laid out as the stripped binary's; the check below makes sure).
func pageReport(pid int, bin, twin string) error {
	pages, err := residentPages(pid, bin)
	if err != nil {
		return err
	}
	sf, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer sf.Close()
	tf, err := elf.Open(twin)
	if err != nil {
		return err
	}
	defer tf.Close()
	if a, b := sf.Section(".text"), tf.Section(".text"); a == nil || b == nil || a.Addr != b.Addr || a.Size != b.Size {
		return fmt.Errorf("%s and %s lay out .text differently", bin, twin)
	}
	resident := func(lo, hi uint64) (n uint64) { // bytes of [lo, hi) on resident pages
		for p := lo &^ 4095; p < hi; p += 4096 {
			if pages[p] {
				n += min(hi, p+4096) - max(lo, p)
			}
		}
		return n
	}
	fmt.Printf("  binary's resident pages by section (of %d pages mapped):", len(pages))
	for _, s := range sf.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size < 64<<10 {
			continue
		}
		fmt.Printf(" %s %s of %s;", s.Name, mb(int(resident(s.Addr, s.Addr+s.Size)/1024)), mb(int(s.Size/1024)))
	}
	fmt.Println()
	syms, err := tf.Symbols()
	if err != nil {
		return err
	}
	text := tf.Section(".text")
	byPkg := map[string]uint64{}
	var all uint64
	for _, s := range syms {
		if s.Value < text.Addr || s.Value >= text.Addr+text.Size || s.Size == 0 {
			continue
		}
		n := resident(s.Value, s.Value+s.Size)
		byPkg[module(s.Name)] += n
		all += n
	}
	names := make([]string, 0, len(byPkg))
	for n := range byPkg {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return byPkg[names[i]] > byPkg[names[j]] })
	fmt.Printf("  resident .text by module (%s in functions):", mb(int(all/1024)))
	for _, n := range names[:min(14, len(names))] {
		fmt.Printf(" %s %s;", n, mb(int(byPkg[n]/1024)))
	}
	fmt.Println()
	return nil
}

var pkgPath = regexp.MustCompile(`^((?:[^/(\[]*/)*[^./(\[]*)`)

// module is the module (or standard package) a symbol belongs to.
func module(sym string) string {
	p := pkgPath.FindString(sym)
	for _, m := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/envoyproxy/go-control-plane",
		"istio.io/api", "github.com/prometheus", "golang.org/x/net", "github.com/skiff-mesh/skiff", "github.com/miekg/dns",
		"github.com/cncf/xds", "google.golang.org/genproto", "crypto", "net/http", "vendor/golang.org"} {
		if strings.HasPrefix(p, m) {
			return m
		}
	}
	if !strings.Contains(p, ".") {
		return "std " + p
	}
	return p
}
