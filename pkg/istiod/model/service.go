package model

import (
	"strings"
)

// DefaultDomain is the cluster DNS domain of Kubernetes service host names.
const DefaultDomain = "cluster.local"

// Registry names, as in the NameTable's NameInfo.registry.
const (
	RegistryKubernetes = "Kubernetes"
	RegistryExternal   = "External"
)

// ExportToAnnotation is the Service annotation that limits its visibility.
const ExportToAnnotation = "networking.istio.io/exportTo"

// Protocol is a port's application protocol, as Istio derives it from the
// port name prefix or appProtocol.
type Protocol string

// Protocols istiod distinguishes.
const (
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTP2 Protocol = "HTTP2"
	ProtocolGRPC  Protocol = "GRPC"
	ProtocolHTTPS Protocol = "HTTPS"
	ProtocolTLS   Protocol = "TLS"
	ProtocolTCP   Protocol = "TCP"
)

// ParseProtocol maps a port name ("http-web", "grpc") or an appProtocol
// value to a Protocol; anything unknown is TCP.
func ParseProtocol(s string) Protocol {
	s = strings.ToLower(s)
	if i := strings.IndexAny(s, "-_"); i >= 0 {
		s = s[:i]
	}
	switch s {
	case "http":
		return ProtocolHTTP
	case "http2", "h2c", "kubernetes.io/h2c":
		return ProtocolHTTP2
	case "grpc", "grpc-web":
		return ProtocolGRPC
	case "https":
		return ProtocolHTTPS
	case "tls":
		return ProtocolTLS
	}
	return ProtocolTCP
}

// IsHTTP reports whether p is served through an HTTP connection manager.
func (p Protocol) IsHTTP() bool {
	return p == ProtocolHTTP || p == ProtocolHTTP2 || p == ProtocolGRPC
}

// IsHTTP2 reports whether upstream connections must use HTTP/2.
func (p Protocol) IsHTTP2() bool { return p == ProtocolHTTP2 || p == ProtocolGRPC }

// Resolution is how a client finds a service's endpoints.
type Resolution int

// Resolutions, as ServiceEntry's.
const (
	// ClientSideLB: endpoints come from EDS.
	ClientSideLB Resolution = iota
	// DNSLB: the client resolves the endpoints' host names.
	DNSLB
	// Passthrough: traffic goes to the original destination.
	Passthrough
)

// Port is one port of a service.
type Port struct {
	// Name is the port name ("http").
	Name string
	// Port is the service port.
	Port uint16
	// Protocol is the application protocol.
	Protocol Protocol
	// TargetPort is the numeric workload port, or 0 when it is named by
	// TargetPortName or is the same as Port.
	TargetPort uint16
	// TargetPortName is a named container port, if the target is named.
	TargetPortName string
}

// Service is a host name clients can reach, from a Kubernetes Service or a
// ServiceEntry host.
type Service struct {
	// Hostname is the fully qualified name ("reviews.default.svc.cluster.local").
	Hostname string
	// Name and Namespace are those of the object that defined it.
	Name, Namespace string
	// Addresses are virtual IPs; empty for headless and address-less hosts.
	Addresses []string
	// Ports are the service ports, sorted by number.
	Ports []Port
	// Resolution says how clients find endpoints.
	Resolution Resolution
	// MeshExternal is true for ServiceEntry hosts outside the mesh.
	MeshExternal bool
	// Registry is RegistryKubernetes or RegistryExternal.
	Registry string
	// ExportTo lists the namespaces that see it; "*" or empty is all, "." its own.
	ExportTo []string
	// Selector selects the workloads backing it (nil for none).
	Selector map[string]string
}

// Port returns the service port numbered n.
func (s *Service) Port(n uint16) (Port, bool) {
	for _, p := range s.Ports {
		if p.Port == n {
			return p, true
		}
	}
	return Port{}, false
}

// VisibleTo reports whether the service is exported to namespace ns.
func (s *Service) VisibleTo(ns string) bool { return exportedTo(s.ExportTo, s.Namespace, ns) }

func exportedTo(exportTo []string, own, ns string) bool {
	if len(exportTo) == 0 {
		return true
	}
	for _, e := range exportTo {
		switch e {
		case "*", ns:
			return true
		case ".":
			if own == ns {
				return true
			}
		}
	}
	return false
}

// ClusterName returns Istio's outbound cluster name "outbound|PORT|SUBSET|HOST".
func ClusterName(port uint16, subset, host string) string {
	return "outbound|" + itoa(port) + "|" + subset + "|" + host
}

// InboundClusterName returns Istio's inbound cluster name "inbound|PORT||".
func InboundClusterName(port uint16) string { return "inbound|" + itoa(port) + "||" }

// ParseClusterName splits an outbound cluster name; ok is false for others.
// It allocates nothing: EDS looks up every named cluster with it.
func ParseClusterName(name string) (port uint16, subset, host string, ok bool) {
	rest, ok := strings.CutPrefix(name, "outbound|")
	if !ok {
		return 0, "", "", false
	}
	num, rest, ok1 := strings.Cut(rest, "|")
	subset, host, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 {
		return 0, "", "", false
	}
	p, err := parsePort(num)
	if err != nil {
		return 0, "", "", false
	}
	return p, subset, host, true
}
