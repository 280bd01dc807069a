package xdsproxy

import (
	"context"
	"fmt"
	"strings"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// TableLoaded reports whether a NameTable has arrived (for readiness).
func (p *Proxy) TableLoaded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tableSeen
}

// nameTables keeps the agent's own NameTable stream while no downstream
// stream carries the subscription: always with NoEnvoy, otherwise once none
// has for OwnStreamAfter, until a downstream's stream delivers a table.
func (p *Proxy) nameTables(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if !p.opts.NoEnvoy && !p.carrier.waitUncarried(ctx, p.opts.OwnStreamAfter) {
			return
		}
		sctx, cancel := context.WithCancel(ctx)
		if !p.opts.NoEnvoy {
			go func() {
				if p.carrier.waitDelivered(sctx) {
					cancel()
				}
			}()
		}
		p.log.Debug("NameTable on the agent's own stream")
		delivered, err := p.nameTableStream(sctx)
		moved := sctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case moved:
			p.log.Debug("NameTable moved to the proxy's stream")
			attempt = -1
			continue
		case delivered:
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
	// With NoEnvoy, clusters first: istiod answers in order, so the
	// service ports are in place when the first NameTable comes, and the
	// DNS proxy builds its answers once at start-up rather than twice.
	reqs := []*discovery.DiscoveryRequest{{TypeUrl: NameTableType}}
	if p.opts.OnClusters != nil && p.opts.NoEnvoy {
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
		var ack *discovery.DiscoveryRequest
		switch resp.GetTypeUrl() {
		case ClusterType:
			if p.opts.OnClusters == nil {
				continue
			}
			p.opts.OnClusters(sotwNames(resp))
			ack = &discovery.DiscoveryRequest{TypeUrl: ClusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
		case NameTableType:
			ack = p.sotwTable(resp)
			delivered = delivered || ack.ErrorDetail == nil
		default:
			continue
		}
		if err := s.Send(ack); err != nil {
			return delivered, err
		}
	}
}

// sotwTable hands a state-of-the-world NameTable response to OnNameTable
// and returns its ACK, or its NACK if it holds no single NameTable.
func (p *Proxy) sotwTable(resp *discovery.DiscoveryResponse) *discovery.DiscoveryRequest {
	ack := &discovery.DiscoveryRequest{TypeUrl: NameTableType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	if ack.ErrorDetail = p.table(resp.GetResources()); ack.ErrorDetail != nil {
		ack.VersionInfo = ""
	}
	return ack
}

// deltaTable is sotwTable for a delta stream. A response that only removes
// resources leaves the table as it is.
func (p *Proxy) deltaTable(resp *discovery.DeltaDiscoveryResponse) *discovery.DeltaDiscoveryRequest {
	ack := &discovery.DeltaDiscoveryRequest{TypeUrl: NameTableType, ResponseNonce: resp.GetNonce()}
	if len(resp.GetResources()) == 0 {
		return ack
	}
	anys := make([]*anypb.Any, 0, 1)
	for _, r := range resp.GetResources() {
		anys = append(anys, r.GetResource())
	}
	ack.ErrorDetail = p.table(anys)
	return ack
}

// table decodes the one NameTable in resources and hands it on; the error
// detail for a NACK otherwise.
func (p *Proxy) table(resources []*anypb.Any) *status.Status {
	if len(resources) != 1 {
		p.log.Warn("NameTable rejected", "err", "want exactly one NameTable", "resources", len(resources))
		return &status.Status{Code: 3, Message: "want exactly one NameTable"}
	}
	var table nds.NameTable
	if err := unmarshalTable(resources[0], &table); err != nil {
		p.log.Warn("NameTable rejected", "err", err)
		return &status.Status{Code: 3, Message: err.Error()}
	}
	p.mu.Lock()
	p.tableSeen = true
	p.mu.Unlock()
	p.opts.OnNameTable(&table)
	return nil
}

// unmarshalTable decodes a NameTable from a, checking its type as
// anypb's UnmarshalTo does (by the name after the last "/").
func unmarshalTable(a *anypb.Any, t *nds.NameTable) error {
	name := strings.TrimPrefix(nds.TypeURL, "type.googleapis.com/")
	if url := a.GetTypeUrl(); url != name && !strings.HasSuffix(url, "/"+name) {
		return fmt.Errorf("mismatched message type: got %q, want %q", url, nds.TypeURL)
	}
	return t.Unmarshal(a.GetValue())
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
