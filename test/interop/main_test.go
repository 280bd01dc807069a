package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// skiffBin is where Skiff's binaries are built, once per test binary.
var skiffBin string

var (
	buildMu sync.Mutex
	built   = map[string]error{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "interop-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	skiffBin = dir
	code := m.Run()
	os.RemoveAll(dir)
	if injectDir != "" {
		os.RemoveAll(injectDir)
	}
	os.Exit(code)
}

// skiff returns the path of Skiff's binary cmd/name, building it on first
// use; a name with a slash is a package path in the module instead.
func skiff(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	err, ok := built[name]
	if !ok {
		pkg := "github.com/skiff-mesh/skiff/cmd/" + name
		if strings.Contains(name, "/") {
			pkg = "github.com/skiff-mesh/skiff/" + name
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(skiffBin, filepath.Base(name)), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("build skiff %s: %v\n%s", name, e, out)
		}
		built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(skiffBin, filepath.Base(name))
}
