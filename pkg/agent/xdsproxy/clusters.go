package xdsproxy

import (
	"context"
	"slices"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
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
func sotwNames(b []byte) ([]string, error) {
	resp, err := xdswire.DecodeDiscoveryResponse(b)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(resp.Resources))
	for _, r := range resp.Resources {
		// Field 1 is the name, read without decoding the rest or linking
		// the Cluster type.
		if n, ok, err := xdswire.FieldString(r.Value, 1); err == nil && ok && n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// deltaNames applies a delta CDS response to held, the names a stream
// holds, and returns them all.
func deltaNames(held map[string]struct{}, b []byte) ([]string, error) {
	resp, err := xdswire.DecodeDeltaDiscoveryResponse(b)
	if err != nil {
		return nil, err
	}
	for _, r := range resp.Resources {
		held[r.Name] = struct{}{}
	}
	for _, n := range resp.RemovedResources {
		delete(held, n)
	}
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	return names, nil
}
