// Package istiobin finds Istio's own binaries (pilot-agent, pilot-discovery,
// istioctl, istio-cni) and Istio's module directory for interop tests. The binaries are
// built from Istio's published Go module once per machine by
// tools/istiobin/build.sh (`make istio-bins`) into a cache outside the repo;
// the project's go.mod never requires istio.io/istio.
package istiobin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// ModuleVersion is the istio.io/istio module version the binaries are built
// from: Istio 1.31 (its VERSION file says 1.31).
const ModuleVersion = "v0.0.0-20260827124520-eed52ebb66ad"

// Binary names Path accepts.
const (
	PilotAgent     = "pilot-agent"
	PilotDiscovery = "pilot-discovery"
	Istioctl       = "istioctl"
	IstioCNI       = "istio-cni" // Istio's CNI plugin (cni/cmd/istio-cni)
)

// CacheDir is where the build keeps its copy of Istio's module and the
// binaries: ISTIO_CACHE, or ~/.cache/skiff/istio/<ModuleVersion>.
func CacheDir() (string, error) {
	if d := os.Getenv("ISTIO_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("istio cache: %w", err)
	}
	return filepath.Join(home, ".cache", "skiff", "istio", ModuleVersion), nil
}

// Script is the path of tools/istiobin/build.sh in this checkout.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tools", "istiobin", "build.sh")
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error

	modOnce sync.Once
	modDir  string
	modErr  error
)

// Build runs the build script (a no-op when the binaries are cached and
// their stamp matches; serialised across processes by the script's lock) and
// returns the directory holding the binaries. It runs once per process.
func Build() (string, error) {
	buildOnce.Do(func() {
		cache, err := CacheDir()
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("bash", Script())
		cmd.Env = append(os.Environ(), "ISTIO_MODULE_VERSION="+ModuleVersion, "ISTIO_CACHE="+cache, "ISTIO_BINS="+filepath.Join(cache, "bin"))
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build istio binaries (%s): %w\n%s", Script(), err, out)
			return
		}
		buildDir = filepath.Join(cache, "bin")
	})
	return buildDir, buildErr
}

// Dir returns the directory holding Istio's binaries, building them first
// if needed (the first build takes many minutes: run `make istio-bins`
// before the tests). It fails the test if the build fails, in CI and
// outside it alike: it never skips.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Path returns the path of one of Istio's binaries (PilotAgent,
// PilotDiscovery, Istioctl, IstioCNI).
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("istio binary %s: %v", name, err)
	}
	return p
}

// Module returns Istio's module directory in the module cache (read-only),
// downloading the module if it is not there yet.
func Module() (string, error) {
	modOnce.Do(func() {
		cmd := exec.Command("go", "mod", "download", "-json", "istio.io/istio@"+ModuleVersion)
		// Outside any module, so the project's go.mod is neither read nor changed.
		cmd.Dir = os.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			modErr = fmt.Errorf("go mod download istio.io/istio@%s: %w\n%s%s", ModuleVersion, err, out, stderr.Bytes())
			return
		}
		var m struct{ Dir, Error string }
		if err := json.Unmarshal(out, &m); err != nil {
			modErr = fmt.Errorf("go mod download istio.io/istio@%s: parse %q: %w", ModuleVersion, out, err)
			return
		}
		if m.Error != "" || m.Dir == "" {
			modErr = fmt.Errorf("go mod download istio.io/istio@%s: %s", ModuleVersion, m.Error)
			return
		}
		modDir = m.Dir
	})
	return modDir, modErr
}

// ModuleDir returns Istio's module directory (its chart files and testdata
// can be read from there), failing the test if it cannot be had.
func ModuleDir(t testing.TB) string {
	t.Helper()
	dir, err := Module()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
