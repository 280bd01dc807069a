package model

import "strings"

// Locality is where an endpoint runs.
type Locality struct {
	Region, Zone, Subzone string
}

// ParseLocality parses Istio's "region/zone/subzone" form.
func ParseLocality(s string) Locality {
	parts := strings.SplitN(s, "/", 3)
	var l Locality
	if len(parts) > 0 {
		l.Region = parts[0]
	}
	if len(parts) > 1 {
		l.Zone = parts[1]
	}
	if len(parts) > 2 {
		l.Subzone = parts[2]
	}
	return l
}

// String returns "region/zone/subzone".
func (l Locality) String() string { return l.Region + "/" + l.Zone + "/" + l.Subzone }

// Endpoint is one workload address backing one service port.
type Endpoint struct {
	// Address is an IP address, or a DNS name when DNSName is set.
	Address string
	// DNSName marks Address as a host name (ServiceEntry with DNS resolution).
	DNSName bool
	// Port is the workload port traffic goes to.
	Port uint16
	// ServicePort is the service port this endpoint backs.
	ServicePort uint16
	// Labels are the workload's labels (subsets select on them).
	Labels map[string]string
	// ServiceAccount is the workload's identity.
	ServiceAccount string
	// Locality is where it runs.
	Locality Locality
	// Healthy is false for endpoints that are not ready.
	Healthy bool
	// Weight is the load-balancing weight (at least 1).
	Weight uint32
}

// Matches reports whether the endpoint carries every label of sel.
func (e *Endpoint) Matches(sel map[string]string) bool { return LabelsMatch(sel, e.Labels) }

// LabelsMatch reports whether labels contain every key/value of sel. An
// empty selector matches everything.
func LabelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
