package cni_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/podcache"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// BenchmarkAdd measures CNI ADD through libcni: bridge + host-local alone,
// then with our plugin chained (pod looked up in the local API server and its
// rules installed). The difference is what the plugin adds. Latency
// percentiles are reported per ADD; "concurrent" runs 30 ADDs at once.
func BenchmarkAdd(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, c := range []struct {
		name                 string
		chained, cached, nft bool
	}{
		{"bridge", false, false, false},
		{"bridge+istio-cni", true, false, false},
		{"bridge+istio-cni+podcache", true, true, false},
		// Istio's values.global.nativeNftables: the rules in one netlink
		// batch from the plugin itself, no iptables-restore process.
		{"bridge+istio-cni+podcache+nftables", true, true, true},
	} {
		for _, parallel := range []int{1, 30} {
			name := c.name + "/serial"
			if parallel > 1 {
				name = c.name + "/concurrent30"
			}
			b.Run(name, func(b *testing.B) { benchAdd(b, c.chained, c.cached, c.nft, parallel) })
		}
	}
}

// benchNode is the node name pods are bound to for the pod cache.
const benchNode = "bench-node"

// startPodCache serves the node agent's pod cache in the node's run dir.
func startPodCache(b *testing.B, n *node) *http.Client {
	c, err := podcache.New(kube.Client, benchNode, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sock := filepath.Join(n.dir, cni.PodCacheSocket)
	go func() { _ = c.Serve(ctx, sock); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// bindAndWait binds a pod to the bench node and waits until the cache has it.
func bindAndWait(b *testing.B, hc *http.Client, name string) {
	ctx := kubetest.Context(b)
	if err := kube.Client.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: benchNode}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	polltest.Until(b, "the pod cache has "+name, func() bool {
		resp, err := hc.Get("http://node-agent/api/v1/namespaces/default/pods/" + name)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func benchAdd(b *testing.B, chained, cached, nft bool, parallel int) {
	n := newNode(b, map[string]any{"plugin_log_level": "warn", "native_nftables": nft})
	var hc *http.Client
	if cached {
		hc = startPodCache(b, n)
	}
	if !chained {
		var list map[string]any
		_ = json.Unmarshal(n.conflist.Bytes, &list)
		list["plugins"] = list["plugins"].([]any)[:1]
		raw, _ := json.Marshal(list)
		var err error
		if n.conflist, err = libcni.ConfListFromBytes(raw); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	var mu sync.Mutex
	rounds := (b.N + parallel - 1) / parallel
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		b.StopTimer()
		pods := make([]*netnstest.NS, parallel)
		names := make([]string, parallel)
		for i := range pods {
			pods[i] = netnstest.New(b)
			names[i] = netnstest.UniqueName("bench-")
			createPod(b, names[i], injected(nil))
			if cached {
				bindAndWait(b, hc, names[i])
			}
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for i := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				err := netns.Do(n.ns.Path, func() error {
					_, err := n.cni.AddNetworkList(context.Background(), n.conflist, n.rt(pods[i], names[i]))
					return err
				})
				d := time.Since(start)
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
		b.StopTimer()
		for i := range pods {
			_ = netns.Do(n.ns.Path, func() error {
				return n.cni.DelNetworkList(context.Background(), n.conflist, n.rt(pods[i], names[i]))
			})
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
