package imageset

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
)

// The host's Debian files the images take.
const (
	// hostBusybox is busybox-static's binary.
	hostBusybox = "/bin/busybox"
	// hostNFT and hostLegacy are iptables' two multi-call binaries.
	hostNFT    = "/usr/sbin/xtables-nft-multi"
	hostLegacy = "/usr/sbin/xtables-legacy-multi"
)

// host is what probeHost found.
type host struct {
	// applets are busybox's applet paths, e.g. "/bin/sh".
	applets []string
	// iptables are the iptables binaries, their links, the extensions they
	// load and every shared library (and the loader) those need.
	iptables []ociimage.Entry
}

// probeHost finds busybox's applets and iptables' files, and fails naming
// the Debian package when one is missing.
func probeHost() (host, error) {
	var h host
	out, err := exec.Command(hostBusybox, "--list-full").Output()
	if err != nil {
		return h, fmt.Errorf("%s --list-full (install busybox-static): %w", hostBusybox, err)
	}
	for _, a := range strings.Fields(string(out)) {
		h.applets = append(h.applets, "/"+a)
	}
	h.iptables, err = iptablesFiles()
	return h, err
}

// iptablesFiles is Debian's iptables as an image needs it: both backends
// under their own names, iptables and ip6tables meaning the nft backend
// (what Istio's proxy image selects), the extensions from the xtables
// directory, and the shared libraries ldd lists for all of them.
func iptablesFiles() ([]ociimage.Entry, error) {
	elfs := []string{hostNFT, hostLegacy}
	for _, b := range elfs {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("iptables (install iptables): %w", err)
		}
	}
	entries := []ociimage.Entry{
		ociimage.HostFile(hostNFT, 0o755, hostNFT),
		ociimage.HostFile(hostLegacy, 0o755, hostLegacy),
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, verb := range []string{"", "-save", "-restore"} {
			entries = append(entries,
				ociimage.Symlink("/usr/sbin/"+fam+"-nft"+verb, "xtables-nft-multi"),
				ociimage.Symlink("/usr/sbin/"+fam+"-legacy"+verb, "xtables-legacy-multi"),
				ociimage.Symlink("/usr/sbin/"+fam+verb, fam+"-nft"+verb))
		}
	}
	// The extensions (libxt_REDIRECT.so, libxt_owner.so, ...) are loaded
	// from the multiarch xtables directory compiled into libxtables.
	dirs, _ := filepath.Glob("/usr/lib/*/xtables")
	if len(dirs) != 1 {
		return nil, fmt.Errorf("want one /usr/lib/*/xtables directory, found %q", dirs)
	}
	exts, err := os.ReadDir(dirs[0])
	if err != nil {
		return nil, err
	}
	for _, e := range exts {
		n := e.Name()
		if strings.HasSuffix(n, ".so") && (strings.HasPrefix(n, "libxt_") || strings.HasPrefix(n, "libipt_") || strings.HasPrefix(n, "libip6t_")) {
			p := filepath.Join(dirs[0], n)
			entries = append(entries, ociimage.HostFile(p, 0o644, p))
			elfs = append(elfs, p)
		}
	}
	libs, err := sharedLibraries(elfs)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		entries = append(entries, ociimage.HostFile(l, 0o755, l))
	}
	// iptables-nft resolves protocol names with /etc/protocols when present.
	if _, err := os.Stat("/etc/protocols"); err == nil {
		entries = append(entries, ociimage.HostFile("/etc/protocols", 0o644, "/etc/protocols"))
	}
	return entries, nil
}

// sharedLibraries runs ldd on each file and returns the union of the
// libraries and loaders it names, by the paths it names them (the image
// holds each at that path as a regular file: no host symlinks to follow).
func sharedLibraries(files []string) ([]string, error) {
	var libs []string
	for _, f := range files {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", f, err)
		}
		ls, err := parseLDD(string(out))
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", f, err)
		}
		libs = append(libs, ls...)
	}
	slices.Sort(libs)
	return slices.Compact(libs), nil
}

// parseLDD reads ldd's output: "name => /path (addr)", "/path (addr)" for
// the loader, and the vdso, which is no file.
func parseLDD(out string) ([]string, error) {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0, strings.HasPrefix(f[0], "linux-vdso"), strings.HasPrefix(f[0], "linux-gate"):
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("library %s not found", f[0])
		case len(f) >= 3 && f[1] == "=>":
			libs = append(libs, f[2])
		case path.IsAbs(f[0]):
			libs = append(libs, f[0])
		case strings.Contains(line, "statically linked"):
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	return libs, nil
}
