package model

import (
	"fmt"
	"net/netip"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// GeneratorGRPC is the node metadata GENERATOR value of proxyless gRPC clients.
const GeneratorGRPC = "grpc"

// Proxy is a connected xDS client, identified by its node.
type Proxy struct {
	// ID is the node id ("sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local").
	ID string
	// Type is the first id field ("sidecar", "router").
	Type string
	// IP is the workload address from the id.
	IP string
	// PodName and Namespace come from the id, or NAMESPACE metadata.
	PodName, Namespace string
	// Labels come from node metadata LABELS, else from the pod with IP.
	Labels map[string]string
	// Generator is the GENERATOR metadata ("grpc" for proxyless clients).
	Generator string
}

// ParseProxy parses a node id of the form TYPE~IP~POD.NS~NS.svc.DOMAIN and
// the node metadata.
func ParseProxy(id string, meta *structpb.Struct) (*Proxy, error) {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return nil, fmt.Errorf("node id %q: want 4 fields TYPE~IP~POD.NAMESPACE~DOMAIN", id)
	}
	p := &Proxy{ID: id, Type: parts[0], IP: parts[1]}
	switch p.Type {
	case "sidecar", "router":
	default:
		return nil, fmt.Errorf("node id %q: type %q: want sidecar or router", id, p.Type)
	}
	if _, err := netip.ParseAddr(p.IP); err != nil {
		return nil, fmt.Errorf("node id %q: ip %q: %w", id, p.IP, err)
	}
	if pod, ns, ok := strings.Cut(parts[2], "."); ok {
		p.PodName, p.Namespace = pod, ns
	} else {
		p.PodName = parts[2]
	}
	fields := meta.GetFields()
	if ns := fields["NAMESPACE"].GetStringValue(); ns != "" {
		p.Namespace = ns
	}
	if p.Namespace == "" {
		return nil, fmt.Errorf("node id %q: no namespace (POD.NAMESPACE or NAMESPACE metadata)", id)
	}
	p.Generator = fields["GENERATOR"].GetStringValue()
	if l := fields["LABELS"].GetStructValue(); l != nil {
		p.Labels = map[string]string{}
		for k, v := range l.GetFields() {
			p.Labels[k] = v.GetStringValue()
		}
	}
	return p, nil
}

// IsGRPC reports whether the proxy is a proxyless gRPC client.
func (p *Proxy) IsGRPC() bool { return p.Generator == GeneratorGRPC }

// WorkloadLabels returns the proxy's labels: from metadata, else from its
// pod or WorkloadEntry in pc.
func (p *Proxy) WorkloadLabels(pc *PushContext) map[string]string {
	if p.Labels != nil {
		return p.Labels
	}
	if pod := pc.PodByIP(p.IP); pod != nil && pod.Namespace == p.Namespace {
		return pod.Labels
	}
	if we := pc.WorkloadEntries[p.IP]; we != nil && we.Namespace == p.Namespace {
		return we.Spec.GetLabels()
	}
	return nil
}
