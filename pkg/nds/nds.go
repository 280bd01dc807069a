package nds

// NameTable maps host names to what the DNS proxy needs to answer for them.
type NameTable struct {
	// Table maps a fully qualified host name (without the trailing dot) to
	// its details.
	Table map[string]*NameTable_NameInfo `json:"table,omitempty"`
}

// NameTable_NameInfo describes one host.
type NameTable_NameInfo struct { //nolint:revive // the name protoc-gen-go gives the nested message
	// Ips are the addresses of the host: the service VIPs, or for a
	// headless service's pod name the pod IP.
	Ips []string `json:"ips,omitempty"`
	// Registry is the service registry the host came from, e.g.
	// "Kubernetes".
	Registry string `json:"registry,omitempty"`
	// Shortname is the service name for Kubernetes hosts ("reviews").
	Shortname string `json:"shortname,omitempty"`
	// Namespace is the Kubernetes namespace of the service.
	Namespace string `json:"namespace,omitempty"`
	// AltHosts are other names the host may be asked as (svc., svc.ns.,
	// ...).
	AltHosts []string `json:"alt_hosts,omitempty"`
}

// GetTable returns t.Table, or nil when t is nil.
func (t *NameTable) GetTable() map[string]*NameTable_NameInfo {
	if t != nil {
		return t.Table
	}
	return nil
}

// GetIps returns ni.Ips, or nil when ni is nil.
func (ni *NameTable_NameInfo) GetIps() []string {
	if ni != nil {
		return ni.Ips
	}
	return nil
}

// GetRegistry returns ni.Registry, or "" when ni is nil.
func (ni *NameTable_NameInfo) GetRegistry() string {
	if ni != nil {
		return ni.Registry
	}
	return ""
}

// GetShortname returns ni.Shortname, or "" when ni is nil.
func (ni *NameTable_NameInfo) GetShortname() string {
	if ni != nil {
		return ni.Shortname
	}
	return ""
}

// GetNamespace returns ni.Namespace, or "" when ni is nil.
func (ni *NameTable_NameInfo) GetNamespace() string {
	if ni != nil {
		return ni.Namespace
	}
	return ""
}

// GetAltHosts returns ni.AltHosts, or nil when ni is nil.
func (ni *NameTable_NameInfo) GetAltHosts() []string {
	if ni != nil {
		return ni.AltHosts
	}
	return nil
}
