package xdsproxy

import (
	"context"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// TableLoaded reports whether a NameTable has arrived (for readiness).
func (p *Proxy) TableLoaded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tableSeen
}

// nameTables keeps the agent's own NDS subscription, reconnecting with backoff.
func (p *Proxy) nameTables(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		delivered, err := p.nameTableStream(ctx)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			attempt = 0
		}
		wait := p.backoff(attempt)
		p.log.Warn("NameTable stream ended, reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (p *Proxy) nameTableStream(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(p.opts.Upstream).StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	// With OwnClusters, clusters first: istiod answers in order, so the
	// service ports are in place when the first NameTable comes, and the
	// DNS proxy builds its answers once at start-up rather than twice.
	reqs := []*discovery.DiscoveryRequest{{TypeUrl: NameTableType}}
	if p.opts.OnClusters != nil && p.opts.OwnClusters {
		reqs = append([]*discovery.DiscoveryRequest{{TypeUrl: ClusterType}}, reqs...)
	}
	reqs[0].Node = p.opts.Node // the first request of a stream carries the node
	for _, r := range reqs {
		if err := s.Send(r); err != nil {
			return false, err
		}
	}
	delivered := false
	for {
		resp, err := s.Recv()
		if err != nil {
			return delivered, err
		}
		if resp.GetTypeUrl() == ClusterType && p.opts.OnClusters != nil {
			p.opts.OnClusters(sotwNames(resp))
			if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: ClusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
				return delivered, err
			}
			continue
		}
		ack := &discovery.DiscoveryRequest{TypeUrl: NameTableType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
		var table nds.NameTable
		switch {
		case resp.GetTypeUrl() != NameTableType:
			continue
		case len(resp.GetResources()) != 1:
			ack.ErrorDetail = &status.Status{Code: 3, Message: "want exactly one NameTable"}
		default:
			if err := resp.GetResources()[0].UnmarshalTo(&table); err != nil {
				ack.ErrorDetail = &status.Status{Code: 3, Message: err.Error()}
			}
		}
		if ack.ErrorDetail == nil {
			delivered = true
			p.mu.Lock()
			p.tableSeen = true
			p.mu.Unlock()
			p.opts.OnNameTable(&table)
		} else {
			ack.VersionInfo = ""
			p.log.Warn("NameTable rejected", "err", ack.ErrorDetail.Message)
		}
		if err := s.Send(ack); err != nil {
			return delivered, err
		}
	}
}

// ClusterType is the CDS type URL.
const ClusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// resourceName reads field 1 (the name, as in Cluster and Listener) from an
// encoded resource without decoding the rest or linking its message type.
func resourceName(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return ""
			}
			return string(v)
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return ""
		}
		b = b[m:]
	}
	return ""
}
