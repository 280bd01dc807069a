package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpread checks where services live and how a resource names another
// service: by its short name only within its own namespace.
func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		sp        spread
		i, j      int
		ns, refIJ string
	}{
		{sp: 1, i: 7, j: 8, ns: "bench", refIJ: "svc-0008"},
		{sp: 20, i: 21, j: 22, ns: "bench-01", refIJ: "svc-0022.bench-02.svc.cluster.local"},
		{sp: 20, i: 3, j: 23, ns: "bench-03", refIJ: "svc-0023"},
	} {
		if got := tc.sp.ns(tc.i); got != tc.ns {
			t.Errorf("spread(%d).ns(%d) = %q, want %q", tc.sp, tc.i, got, tc.ns)
		}
		if got := tc.sp.ref(tc.i, tc.j); got != tc.refIJ {
			t.Errorf("spread(%d).ref(%d, %d) = %q, want %q", tc.sp, tc.i, tc.j, got, tc.refIJ)
		}
	}
	if got := spread(3).namespaces(); strings.Join(got, ",") != "bench-00,bench-01,bench-02" {
		t.Errorf("spread(3).namespaces() = %v", got)
	}
	if got := spread(3).cluster(4); got != "outbound|8080||svc-0004.bench-01.svc.cluster.local" {
		t.Errorf("spread(3).cluster(4) = %q", got)
	}
}

// TestWriteMeshSpread checks every object of a spread mesh is written into
// its service's namespace, and a VirtualService routing across namespaces
// names the other service by its full host.
func TestWriteMeshSpread(t *testing.T) {
	dir := t.TempDir()
	if err := writeMesh(fileStore{dir: dir}, spread(4), 12, 2, true); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, want := range []string{"{name: svc-0005, namespace: bench-01}", "{name: svc-0011, namespace: bench-03}"} {
		if !strings.Contains(read("services.yaml"), want) {
			t.Errorf("services.yaml lacks %q", want)
		}
	}
	if vs := read("virtualservices.yaml"); !strings.Contains(vs, "{destination: {host: svc-0011.bench-03.svc.cluster.local}, weight: 10}") {
		t.Errorf("svc-0010's VirtualService does not route to svc-0011 by its full host:\n%s", vs)
	}
	if s := read("slices/svc-0006.yaml"); !strings.Contains(s, "namespace: bench-02") || strings.Contains(s, "namespace: bench-00") {
		t.Errorf("svc-0006's slice or its pods' references are not in bench-02:\n%s", s)
	}
	if p := read("pods/svc-0007.yaml"); !strings.Contains(p, "namespace: bench-03") {
		t.Errorf("svc-0007's pods are not in bench-03:\n%s", p)
	}
}
