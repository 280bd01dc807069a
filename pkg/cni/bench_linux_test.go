package cni_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/capture/capturetest"
	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/podcache"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// BenchmarkAdd measures CNI ADD through libcni: bridge + host-local alone,
// then with our plugin chained (pod looked up in the local API server and its
// rules installed). The difference is what the plugin adds. Latency
// percentiles are reported per ADD; "concurrent" runs 30 ADDs at once. The
// istio-1.31 cases chain Istio's own plugin (pkg/istiobin) instead, which
// asks the API server for the pod; the floor cases the cheapest plugin
// there can be (testdata/floor), to show what any process costs.
// cpu-per-add-ms is the CPU time of the chain's processes per ADD (their
// user and system time, as the kernel accounts it when they are reaped).
func BenchmarkAdd(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, c := range []struct {
		name string
		chain
	}{
		{"bridge", chain{}},
		{"bridge+istio-cni", chain{chained: true}},
		{"bridge+istio-cni+podcache", chain{chained: true, cached: true}},
		// Istio's values.global.nativeNftables: the rules in one netlink
		// batch from the plugin itself, no iptables-restore process.
		{"bridge+istio-cni+podcache+nftables", chain{chained: true, cached: true, nft: true}},
		{"bridge+istio-1.31", chain{chained: true, istio: true}},
		{"bridge+istio-1.31+nftables", chain{chained: true, nft: true, istio: true}},
		// The floor: the cheapest chained plugin, in Go and in C.
		{"bridge+floor-go", chain{chained: true, floor: "go"}},
		{"bridge+floor-c", chain{chained: true, floor: "c"}},
	} {
		for _, parallel := range []int{1, 30} {
			name := c.name + "/serial"
			if parallel > 1 {
				name = c.name + "/concurrent30"
			}
			b.Run(name, func(b *testing.B) { benchAdd(b, c.chain, parallel) })
		}
	}
}

// chain is what BenchmarkAdd chains after bridge + host-local.
type chain struct {
	chained bool   // a second plugin at all
	cached  bool   // install-cni's pod cache (our plugin)
	nft     bool   // native nftables
	istio   bool   // Istio's own plugin in ours' place
	floor   string // the floor plugin ("go", "c") in ours' place
}

// use gives n the plugins c chains: Istio's, the floor, or (as newNode
// left them) ours.
func (c chain) use(b *testing.B, n *node) {
	switch {
	case c.istio:
		n.cni = istioPlugins(b, n)
	case c.floor != "":
		n.cni = floorPlugins(b, n, c.floor)
	}
}

// benchNode is the node name pods are bound to for the pod cache.
const benchNode = "bench-node"

// startPodCache publishes the node's pods in the node's run dir, as
// install-cni does, and returns the dir.
func startPodCache(b testing.TB, n *node) string {
	core, err := kuberest.NewCore(kube.Config, true)
	if err != nil {
		b.Fatal(err)
	}
	c, err := podcache.New(core, benchNode, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	dir := filepath.Join(n.dir, cni.PodCacheDir)
	go func() { _ = c.Publish(ctx, dir); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return dir
}

// bindAndWait binds a pod to the bench node and waits until the cache in
// dir has published it.
func bindAndWait(b testing.TB, dir, name string) {
	ctx := kubetest.Context(b)
	if err := kube.Client.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: benchNode}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	polltest.Until(b, "the pod cache has "+name, func() bool {
		_, err := os.Stat(cni.PodFile(dir, "default", name))
		return err == nil
	})
}

func benchAdd(b *testing.B, c chain, parallel int) {
	n, cache := benchNodeFor(b, c.cached, c.nft)
	c.use(b, n)
	if !c.chained {
		n.conflist = bridgeOnly(b, n.conflist)
	}
	var lat []time.Duration
	var cpu time.Duration // the chains' processes', over every round
	var mu sync.Mutex
	rounds := (b.N + parallel - 1) / parallel
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		b.StopTimer()
		pods, names := benchPods(b, cache, parallel)
		b.StartTimer()
		cpu0 := childCPU(b)
		var wg sync.WaitGroup
		for i := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := timedAdd(n, n.conflist, pods[i], names[i])
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		cpu += childCPU(b) - cpu0
		b.StopTimer()
		if c.chained && c.floor == "" && r == 0 {
			requireCaptured(b, pods[0])
		}
		for i := range pods {
			n.del(n.conflist, pods[i], names[i])
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, "", lat)
	if len(lat) > 0 {
		b.ReportMetric(ms(cpu/time.Duration(len(lat))), "cpu-per-add-ms")
	}
}

// childCPU is the user and system time of this process's reaped children:
// around ADDs, that of the plugins they ran (and of their children).
func childCPU(b *testing.B) time.Duration {
	cpu, _ := childUsage(b)
	return cpu
}

// childUsage is childCPU and the children's minor page faults.
func childUsage(b *testing.B) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt
}

// BenchmarkAddPaired measures what the plugin adds with the two chains run
// alternately, one ADD of each per iteration on pods of the same node, so
// that the machine's load drifts over both alike: bridge + host-local
// alone, and with our plugin chained (pod from install-cni's cache). It
// reports each chain's percentiles and the median of the per-pair
// differences. The istio cases chain Istio's own plugin instead, built by
// pkg/istiobin, with the same configuration: it asks the API server for
// the pod. added-cpu-ms is what the plugin adds to the CPU time of an ADD's
// processes, from the means of each chain, and added-faults to their minor
// page faults.
func BenchmarkAddPaired(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, c := range []struct {
		name string
		chain
	}{
		{"podcache", chain{cached: true}},
		{"podcache+nftables", chain{cached: true, nft: true}},
		{"istio", chain{istio: true}},
		{"istio+nftables", chain{istio: true, nft: true}},
		{"floor-go", chain{floor: "go"}},
		{"floor-c", chain{floor: "c"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n, cache := benchNodeFor(b, c.cached, c.nft)
			c.use(b, n)
			chains := [2]*libcni.NetworkConfigList{bridgeOnly(b, n.conflist), n.conflist}
			var lat [2][]time.Duration
			var cpu [2]time.Duration // each chain's processes', over every ADD
			var faults [2]int64      // their minor page faults
			var diff []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pods, names := benchPods(b, cache, 2)
				b.StartTimer()
				var d [2]time.Duration
				for k := range 2 {
					c := (i + k) % 2 // alternate which chain goes first
					var err error
					cpu0, flt0 := childUsage(b)
					if d[c], err = timedAdd(n, chains[c], pods[c], names[c]); err != nil {
						b.Fatal(err)
					}
					cpu1, flt1 := childUsage(b)
					cpu[c] += cpu1 - cpu0
					faults[c] += flt1 - flt0
					lat[c] = append(lat[c], d[c])
				}
				diff = append(diff, d[1]-d[0])
				b.StopTimer()
				if i == 0 && c.floor == "" {
					requireCaptured(b, pods[1])
				}
				for c := range 2 {
					n.del(chains[c], pods[c], names[c])
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, "bridge-", lat[0])
			reportPercentiles(b, "chained-", lat[1])
			slices.Sort(diff)
			if len(diff) > 0 {
				b.ReportMetric(ms(diff[len(diff)/2]), "added-p50-ms")
				b.ReportMetric(ms(percentile(lat[1], 99)-percentile(lat[0], 99)), "added-p99-ms")
				b.ReportMetric(ms((cpu[1]-cpu[0])/time.Duration(b.N)), "added-cpu-ms")
				b.ReportMetric(float64(faults[1]-faults[0])/float64(b.N), "added-faults")
			}
		})
	}
}

// requireCaptured fails the benchmark unless pod's namespace redirects to
// the proxy (15001) after a chained ADD: a plugin that skipped the pod
// would be timed as a fast one.
func requireCaptured(b *testing.B, pod *netnstest.NS) {
	if st := capturetest.Read(b, pod); !strings.Contains(st.String(), "15001") {
		b.Fatalf("no redirect to 15001 in the pod's namespace after the chained ADD:\n%s", st)
	}
}

// benchNodeFor is a node for the benchmarks, with install-cni's pod cache
// when cached (its dir returned, else ""). As on a node the chart sets up,
// the plugin logs at info and install-cni's log sink takes its records.
func benchNodeFor(b *testing.B, cached, nft bool) (*node, string) {
	n := newNode(b, map[string]any{"plugin_log_level": "info", "native_nftables": nft})
	serveSink(b, n.dir)
	// The plugins' stderr to /dev/null: the runtime keeps it in its own log.
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devnull.Close() })
	n.stderr = devnull
	n.cni = n.plugins(pluginDir)
	if !cached {
		return n, ""
	}
	return n, startPodCache(b, n)
}

// bridgeOnly is list without our plugin: bridge and host-local alone.
func bridgeOnly(b *testing.B, list *libcni.NetworkConfigList) *libcni.NetworkConfigList {
	var m map[string]any
	_ = json.Unmarshal(list.Bytes, &m)
	m["plugins"] = m["plugins"].([]any)[:1]
	raw, _ := json.Marshal(m)
	out, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// benchPods makes k pod namespaces and injected pods (bound to the bench
// node and in its cache when there is one).
func benchPods(b *testing.B, cache string, k int) ([]*netnstest.NS, []string) {
	pods := make([]*netnstest.NS, k)
	names := make([]string, k)
	for i := range pods {
		pods[i] = netnstest.New(b)
		names[i] = netnstest.UniqueName("bench-")
		createPod(b, names[i], injected(nil))
		if cache != "" {
			bindAndWait(b, cache, names[i])
		}
	}
	return pods, names
}

// timedAdd runs one ADD of list from the node namespace and times it.
func timedAdd(n *node, list *libcni.NetworkConfigList, pod *netnstest.NS, name string) (time.Duration, error) {
	start := time.Now()
	err := netns.Do(n.ns.Path, func() error {
		_, err := n.cni.AddNetworkList(context.Background(), list, n.rt(pod, name))
		return err
	})
	return time.Since(start), err
}

// del runs DEL of list for pod, ignoring errors (the namespace goes anyway).
func (n *node) del(list *libcni.NetworkConfigList, pod *netnstest.NS, name string) {
	_ = netns.Do(n.ns.Path, func() error {
		return n.cni.DelNetworkList(context.Background(), list, n.rt(pod, name))
	})
}

// reportPercentiles reports p50 and p99 of lat, in ms, named with prefix.
func reportPercentiles(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(ms(percentile(lat, 50)), prefix+"p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), prefix+"p99-ms")
}

// percentile is the p-th percentile of lat (sorted in place).
func percentile(lat []time.Duration, p int) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
