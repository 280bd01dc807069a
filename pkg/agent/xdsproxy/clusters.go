package xdsproxy

import (
	"context"
	"slices"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// watchesClusters reports whether cluster names are read from the streams
// the proxy carries (OnClusters without NoEnvoy).
func (p *Proxy) watchesClusters() bool { return p.opts.OnClusters != nil && !p.opts.NoEnvoy }

// clusterFeed hands the latest cluster names, when they change, to
// OnClusters on a goroutine of its own, so the DNS proxy's rebuild never
// holds up a response on its way to the proxy.
type clusterFeed struct {
	mu     sync.Mutex
	last   []string
	latest chan []string // holds at most the newest names not yet handed on
}

func newClusterFeed() clusterFeed { return clusterFeed{latest: make(chan []string, 1)} }

// seen records names (sorted here) and queues them if they changed.
func (f *clusterFeed) seen(names []string) {
	slices.Sort(names)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != nil && slices.Equal(f.last, names) {
		return
	}
	f.last = names
	select {
	case <-f.latest: // an older list nobody took yet
	default:
	}
	f.latest <- names
}

// run hands each queued list to on until ctx ends.
func (f *clusterFeed) run(ctx context.Context, on func([]string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case names := <-f.latest:
			on(names)
		}
	}
}

// sotwNames are the cluster names of a state-of-the-world CDS response:
// all of the proxy's clusters.
func sotwNames(resp *discovery.DiscoveryResponse) []string {
	names := make([]string, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		if n := resourceName(r.GetValue()); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// deltaNames applies a delta CDS response to held, the names a stream
// holds, and returns them all.
func deltaNames(held map[string]struct{}, resp *discovery.DeltaDiscoveryResponse) []string {
	for _, r := range resp.GetResources() {
		held[r.GetName()] = struct{}{}
	}
	for _, n := range resp.GetRemovedResources() {
		delete(held, n)
	}
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	return names
}
