package dnsproxy

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// Kubernetes short forms. A service reviews.default.svc.cluster.local. is
// also answered as reviews.default., reviews.default.svc.,
// reviews.default.svc.cluster. and, in the pod's namespace, reviews.
// Stored, they were three names in five of the table; now a name the table
// does not hold is completed with each tail of the cluster's service
// domain (and, for one in the pod's namespace, with the namespace too),
// and answered as the service it then names, if that service's short
// forms are derived. A form two services claim goes to the first in name
// order, as when they were stored; a host's own name or an alt_hosts entry
// that took a form first is stored and found before any of this.

// derivable returns the length of name.ns. in wire form when every short
// form of the host is what derive makes of it (its name is exactly
// name.ns.<service domain>. and ns is one label), or 0.
func (t *table) derivable(fqdn string, ni *nds.NameTable_NameInfo, o tableOptions) uint8 {
	if len(t.svcWire) == 0 || len(derivedAlts(fqdn, ni, o)) == 0 || strings.Contains(ni.GetNamespace(), ".") {
		return 0
	}
	stem := strings.ToLower(ni.GetShortname()) + "." + strings.ToLower(ni.GetNamespace()) + "."
	if fqdn != stem+o.svcDomain+"." {
		return 0
	}
	key, err := nameKey(stem, 0)
	if err != nil || len(key)-3 > 0xff {
		return 0
	}
	return uint8(len(key) - 3) // no root label, no type
}

// setDomains records the wire forms derive completes names with.
func (t *table) setDomains(o tableOptions) {
	if o.svcDomain == "" {
		return
	}
	key, err := nameKey(o.svcDomain+".", 0)
	if err != nil {
		return
	}
	t.svcWire = []byte(key[:len(key)-3])
	if _, ok := dns.IsDomainName(o.namespace); o.namespace == "" || !ok || strings.Contains(o.namespace, ".") {
		return
	}
	if key, err = nameKey(strings.ToLower(o.namespace)+"."+o.svcDomain+".", 0); err == nil {
		t.nsSvcWire = []byte(key[:len(key)-3])
	}
}

// derive returns the answers of the service the wire name (lower case,
// with its root label) is a short form of, or nil.
func (t *table) derive(name []byte) *nameAnswers {
	if len(t.svcWire) == 0 || len(name) < 2 {
		return nil
	}
	stem := name[:len(name)-1]
	var best *nameAnswers
	for off := 0; off < len(t.svcWire); off += 1 + int(t.svcWire[off]) {
		if n := t.completion(stem, t.svcWire[off:]); n != nil && len(stem) >= int(n.base) && (best == nil || n.rank < best.rank) {
			best = n
		}
	}
	if len(t.nsSvcWire) > 0 {
		nsLen := len(t.nsSvcWire) - len(t.svcWire)
		if n := t.completion(stem, t.nsSvcWire); n != nil && len(stem)+nsLen == int(n.base) && (best == nil || n.rank < best.rank) {
			best = n
		}
	}
	return best
}

// completion returns the answers of the host named stem+suffix (wire
// forms without the root label) when its short forms are derived.
func (t *table) completion(stem, suffix []byte) *nameAnswers {
	if len(stem)+len(suffix)+1 > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	c := append(append(append(buf[:0], stem...), suffix...), 0)
	n := t.names[string(c)]
	if n == nil || n.base == 0 || n.host != string(c) {
		return nil
	}
	return n
}
