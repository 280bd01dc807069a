package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
	"github.com/skiff-mesh/skiff/pkg/procfields"
)

// BenchmarkIdleRSS: install-cni as the chart runs it, on a node of 110
// pods (the kubelet's default maximum) on a kube-apiserver, 5 s after its
// pod cache publishes the last of them. Reports its resident memory, split
// into the binary's pages and the rest, and the binary's size.
// INSTALL_CNI_BIN measures another build instead of this tree's.
//
//	go test -run XXX -bench IdleRSS -benchtime 3x ./cmd/install-cni/
func BenchmarkIdleRSS(b *testing.B) {
	env := kubetest.Start(b)
	ctx := kubetest.Context(b)
	bin := os.Getenv("INSTALL_CNI_BIN")
	if bin == "" {
		bin = buildInstallCNI(b)
	}
	tok := chartServiceAccount(b, env)
	ch := renderChart(b, nil)
	ch.apply(b, env.Client)
	const node, pods = "bench-node", 110
	for i := range pods {
		_, err := env.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Annotations: map[string]string{"sidecar.istio.io/status": "{}"}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}, metav1.CreateOptions{})
		must(b, err)
	}
	var sum [3]float64 // VmRSS, RssFile, RssAnon in kB
	for b.Loop() {
		r := ch.start(b, env, bin, tok, node)
		last := cni.PodFile(filepath.Join(r.dir, "run", cni.PodCacheDir), "default", fmt.Sprintf("app-%d", pods-1))
		polltest.Until(b, "the pod cache publishes the node's last pod", func() bool {
			_, err := os.Stat(last)
			return err == nil
		})
		time.Sleep(5 * time.Second) // the measurement's settle time, not a wait for an event
		st, err := procfields.Read(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
		must(b, err)
		for i, k := range []string{"VmRSS", "RssFile", "RssAnon"} {
			sum[i] += float64(st[k])
		}
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	n := float64(b.N) * 1024
	b.ReportMetric(sum[0]/n, "rss-MiB")
	b.ReportMetric(sum[1]/n, "file-MiB")
	b.ReportMetric(sum[2]/n, "anon-MiB")
	fi, err := os.Stat(bin)
	must(b, err)
	b.ReportMetric(float64(fi.Size())/1e6, "binary-MB")
}
