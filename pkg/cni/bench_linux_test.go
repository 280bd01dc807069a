package cni_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// BenchmarkAdd measures CNI ADD through libcni: bridge + host-local alone,
// then with our plugin chained (pod looked up in the local API server and its
// rules installed). The difference is what the plugin adds. Latency
// percentiles are reported per ADD; "concurrent" runs 30 ADDs at once.
func BenchmarkAdd(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, chained := range []bool{false, true} {
		for _, parallel := range []int{1, 30} {
			name := "bridge/serial"
			if chained {
				name = "bridge+istio-cni/serial"
			}
			if parallel > 1 {
				name = name[:len(name)-len("serial")] + "concurrent30"
			}
			b.Run(name, func(b *testing.B) { benchAdd(b, chained, parallel) })
		}
	}
}

func benchAdd(b *testing.B, chained bool, parallel int) {
	n := newNode(b, map[string]any{"plugin_log_level": "warn"})
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
