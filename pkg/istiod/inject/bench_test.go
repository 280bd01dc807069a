package inject

import "testing"

// BenchmarkInject is one pod through the whole injector with the chart's
// configuration (templates rendered, merged, the pod patched), as the
// webhook runs it for each admission request.
func BenchmarkInject(b *testing.B) {
	cfg, err := DefaultConfig()
	if err != nil {
		b.Fatal(err)
	}
	in, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	pod := appPod()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.Inject(pod.DeepCopy(), "bookinfo"); err != nil {
			b.Fatal(err)
		}
	}
}
