package xdsproxy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
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
	s, err := p.opts.Upstream.NewStream(ctx, sotwMethod)
	if err != nil {
		return false, err
	}
	// With NoEnvoy, clusters first: istiod answers in order, so the
	// service ports are in place when the first NameTable comes, and the
	// DNS proxy builds its answers once at start-up rather than twice.
	reqs := []*xdswire.DiscoveryRequest{{TypeURL: NameTableType}}
	if p.opts.OnClusters != nil && p.opts.NoEnvoy {
		reqs = append([]*xdswire.DiscoveryRequest{{TypeURL: ClusterType}}, reqs...)
	}
	reqs[0].Node = p.opts.Node // the first request of a stream carries the node
	for _, r := range reqs {
		if err := s.Send(r.Marshal()); err != nil {
			return false, err
		}
	}
	delivered := false
	for {
		b, err := s.Recv()
		if err != nil {
			return delivered, err
		}
		resp, err := xdswire.DecodeDiscoveryResponse(b)
		if err != nil {
			return delivered, err
		}
		var ack *xdswire.DiscoveryRequest
		switch resp.TypeURL {
		case ClusterType:
			if p.opts.OnClusters == nil {
				continue
			}
			names, _ := sotwNames(b)
			p.opts.OnClusters(names)
			ack = &xdswire.DiscoveryRequest{TypeURL: ClusterType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
		case NameTableType:
			ack = p.sotwTable(b)
			delivered = delivered || ack.ErrorDetail == nil
		default:
			continue
		}
		if err := s.Send(ack.Marshal()); err != nil {
			return delivered, err
		}
	}
}

// sotwTable hands a state-of-the-world NameTable response to OnNameTable
// and returns its ACK, or its NACK if it holds no single NameTable.
func (p *Proxy) sotwTable(b []byte) *xdswire.DiscoveryRequest {
	resp, err := xdswire.DecodeDiscoveryResponse(b)
	if err != nil {
		return &xdswire.DiscoveryRequest{TypeURL: NameTableType, ErrorDetail: p.reject(err)}
	}
	ack := &xdswire.DiscoveryRequest{TypeURL: NameTableType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	if ack.ErrorDetail = p.table(resp.Resources); ack.ErrorDetail != nil {
		ack.VersionInfo = ""
	}
	return ack
}

// deltaTable is sotwTable for a delta stream. A response that only removes
// resources leaves the table as it is.
func (p *Proxy) deltaTable(b []byte) *xdswire.DeltaDiscoveryRequest {
	resp, err := xdswire.DecodeDeltaDiscoveryResponse(b)
	if err != nil {
		return &xdswire.DeltaDiscoveryRequest{TypeURL: NameTableType, ErrorDetail: p.reject(err)}
	}
	ack := &xdswire.DeltaDiscoveryRequest{TypeURL: NameTableType, ResponseNonce: resp.Nonce}
	if len(resp.Resources) == 0 {
		return ack
	}
	anys := make([]xdswire.Any, 0, 1)
	for _, r := range resp.Resources {
		var a xdswire.Any
		if r.Resource != nil {
			a = *r.Resource
		}
		anys = append(anys, a)
	}
	ack.ErrorDetail = p.table(anys)
	return ack
}

// table decodes the one NameTable in resources and hands it on; the error
// detail for a NACK otherwise.
func (p *Proxy) table(resources []xdswire.Any) *xdswire.Status {
	if len(resources) != 1 {
		return p.reject(fmt.Errorf("want exactly one NameTable, got %d resources", len(resources)))
	}
	// The type is checked as anypb's UnmarshalTo does: by the name after
	// the last "/".
	name := strings.TrimPrefix(NameTableType, "type.googleapis.com/")
	if t := resources[0].TypeURL; t != name && !strings.HasSuffix(t, "/"+name) {
		return p.reject(fmt.Errorf("resource of type %q, want %s", t, NameTableType))
	}
	var table nds.NameTable
	if err := table.Unmarshal(resources[0].Value); err != nil {
		return p.reject(err)
	}
	p.mu.Lock()
	p.tableSeen = true
	p.mu.Unlock()
	p.opts.OnNameTable(&table)
	return nil
}

// reject logs a NameTable response the agent cannot take and returns the
// error detail of its NACK (INVALID_ARGUMENT).
func (p *Proxy) reject(err error) *xdswire.Status {
	p.log.Warn("NameTable rejected", "err", err)
	return &xdswire.Status{Code: 3, Message: err.Error()}
}

// ClusterType is the CDS type URL.
const ClusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
