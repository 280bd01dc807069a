package cni_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// floorPlugins runs n's chain with the cheapest possible plugin in our
// plugin's place (testdata/floor, built static and stripped as our plugin
// is): in Go, or in C ("c"). What it adds to an ADD is the floor of any
// chained plugin written that way, on this machine.
func floorPlugins(b *testing.B, n *node, lang string) *libcni.CNIConfig {
	dir := b.TempDir()
	out := filepath.Join(dir, "istio-cni")
	var build *exec.Cmd
	switch lang {
	case "c":
		build = exec.Command("cc", "-O2", "-static", "-s", "-o", out, "testdata/floor/floor.c")
	default:
		build = exec.Command("go", "build", "-ldflags", "-s -w", "-o", out, "./testdata/floor")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if msg, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the %s floor plugin: %v\n%s", lang, err, msg)
	}
	return n.plugins(dir)
}
