package dnsproxy

// portIndex holds the service ports of the mesh hosts, by the host's name
// in wire form, lower case. The agent reads them from the proxy's cluster
// names, which change far more often than the names: a new index replaces
// the table's without rebuilding it.
type portIndex struct {
	byHost map[string][]ServicePort
}

// newPortIndex indexes ports, keyed by host name as in the NameTable
// ("reviews.default.svc.cluster.local"). Names that are not domain names
// are left out: no question could reach them.
func newPortIndex(ports map[string][]ServicePort) *portIndex {
	idx := &portIndex{byHost: make(map[string][]ServicePort, len(ports))}
	for host, ps := range ports {
		key, err := nameKey(canonicalName(host), 0)
		if err != nil || len(ps) == 0 {
			continue
		}
		idx.byHost[key[:len(key)-2]] = ps
	}
	return idx
}
