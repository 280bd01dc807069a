package main_test

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kuberest/kuberesttest"
)

// TestNoMethodByRuntimeName: nothing istiod links looks a method up by a
// name only known at run time (reflect's Method or MethodByName with a
// variable name, as text/template's executor does). One such call makes
// the linker keep every exported method of every type that is ever put
// in an interface, and istiod links the generated Envoy, Istio and
// Kubernetes APIs: it was 79 MB with text/template's executor linked, 43
// MB without. Injection templates run on pkg/gotmpl instead. The build
// is the one `make build` makes (the Makefile's GOTAGS).
func TestNoMethodByRuntimeName(t *testing.T) {
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-ldflags=-dumpdep", "-o", "/dev/null", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		// The linker marks such a function "<ReflectMethod>" in its
		// dependency dump: "caller -> callee <ReflectMethod>" or
		// "fn <ReflectMethod> -> callee".
		line := sc.Text()
		if !strings.Contains(line, "<ReflectMethod>") {
			continue
		}
		fn, _, _ := strings.Cut(line, " <ReflectMethod>")
		if i := strings.LastIndex(fn, " -> "); i >= 0 {
			fn = fn[i+len(" -> "):]
		}
		if !seen[fn] {
			seen[fn] = true
			t.Errorf("istiod links %s, which looks methods up by a run-time name", fn)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v", err)
	}
}

// TestNoClientsets: istiod talks to the API server through REST clients of
// its own groups (pkg/kuberest), not client-go's or Istio's clientsets,
// informer factories, discovery client or leader election, which register
// every Kubernetes API group and keep their generated code in the binary
// (43 MB with them, 30 MB without).
func TestNoClientsets(t *testing.T) { kuberesttest.NoClientsets(t) }
