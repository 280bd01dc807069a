package file

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
)

// BenchmarkApplyOneFile is the registry's share of an endpoint change in
// a directory of 2000 files (a Service and an EndpointSlice for each of
// 1000 services): one slice file rewritten, read again, and the objects
// assembled.
func BenchmarkApplyOneFile(b *testing.B) {
	dir := b.TempDir()
	const sliceYAML = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s, namespace: default, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 80}]
endpoints: [{addresses: ["10.1.%d.%d"]}]
`
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		write(b, filepath.Join(dir, "services", name+".yaml"), svc(name, i%250+1))
		write(b, filepath.Join(dir, "slices", name+".yaml"), fmt.Sprintf(sliceYAML, name, name, i%250, 1))
	}
	r := New(dir, slog.New(slog.DiscardHandler))
	if err := r.Load(); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "slices", "svc-0007.yaml")
	round := 0
	for b.Loop() {
		round++
		write(b, path, fmt.Sprintf(sliceYAML, "svc-0007", "svc-0007", 7, round%200+2))
		if !r.apply(map[string]bool{path: true}) {
			b.Fatal("no change seen")
		}
	}
	if n := len(r.Inputs().EndpointSlices); n != 1000 {
		b.Fatalf("%d slices", n)
	}
}
