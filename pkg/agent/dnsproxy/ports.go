package dnsproxy

import "sort"

// portIndex holds the service ports of the mesh hosts. The agent reads
// them from the proxy's cluster names, which change far more often than
// the names: a new index replaces the table's without rebuilding it. SRV
// questions are rare, so the index is laid out for size, not speed: hosts
// sorted by name for a binary search, the names in one string and the
// ports in one array.
type portIndex struct {
	hosts []hostPorts
}

// hostPorts are the ports of one host, by its name in wire form, lower
// case.
type hostPorts struct {
	host  string
	ports []ServicePort
}

// newPortIndex indexes ports, keyed by host name as in the NameTable
// ("reviews.default.svc.cluster.local"). Names that are not domain names
// are left out: no question could reach them.
func newPortIndex(ports map[string][]ServicePort) *portIndex {
	idx := &portIndex{hosts: make([]hostPorts, 0, len(ports))}
	var names []string
	n := 0
	for host, ps := range ports {
		w, err := packName(canonicalName(host))
		if err != nil || len(ps) == 0 {
			continue
		}
		idx.hosts = append(idx.hosts, hostPorts{host: w, ports: ps})
		n += len(ps)
	}
	sort.Slice(idx.hosts, func(i, j int) bool { return idx.hosts[i].host < idx.hosts[j].host }) // not generic: see addPTR
	all := make([]ServicePort, 0, n)
	for _, h := range idx.hosts {
		names = append(names, h.host)
	}
	names = oneString(names)
	for i := range idx.hosts {
		start := len(all)
		all = append(all, idx.hosts[i].ports...)
		idx.hosts[i] = hostPorts{host: names[i], ports: all[start:len(all):len(all)]}
	}
	return idx
}

// of returns the ports of the host (wire name, lower case), or nil.
func (idx *portIndex) of(host string) []ServicePort {
	i := sort.Search(len(idx.hosts), func(i int) bool { return idx.hosts[i].host >= host })
	if i == len(idx.hosts) || idx.hosts[i].host != host {
		return nil
	}
	return idx.hosts[i].ports
}
