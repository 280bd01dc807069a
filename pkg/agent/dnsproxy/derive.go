package dnsproxy

import (
	"bytes"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// Kubernetes short forms. A service reviews.default.svc.cluster.local. is
// also answered as reviews.default., reviews.default.svc.,
// reviews.default.svc.cluster. and, in the pod's namespace, reviews.
// Stored, they were three names in five of the table; now a name the table
// does not hold is completed with each tail of the cluster's service
// domain (and, for one in the pod's namespace, with the namespace too),
// and answered as the service it then names, if that service's short
// forms are derived. Only one service can be found so: a form that two
// claim is stored for the first in name order (as all were before), and a
// host's own name or an alt_hosts entry that took a form first is stored
// too, and found before any of this.

// derivable returns the length of name.ns. in wire form when every short
// form of the host is what derive makes of it (its name is exactly
// name.ns.<service domain>. and ns is one label), or 0. It records what
// derive's filters need of the host.
func (t *table) derivable(fqdn string, ni *nds.NameTable_NameInfo, o tableOptions) uint8 {
	ns := strings.ToLower(ni.GetNamespace())
	if len(t.svcWire) == 0 || len(derivedAlts(fqdn, ni, o)) == 0 || strings.Contains(ns, ".") {
		return 0
	}
	short := strings.ToLower(ni.GetShortname())
	if fqdn != short+"."+ns+"."+o.svcDomain+"." {
		return 0
	}
	stemWire, err := packName(short + "." + ns + ".")
	if err != nil || len(stemWire)-1 > 0xff {
		return 0
	}
	t.namespaces[string(append([]byte{byte(len(ns))}, ns...))] = struct{}{}
	if ns == strings.ToLower(o.namespace) {
		t.shortLabels = max(t.shortLabels, strings.Count(short, ".")+1)
	}
	return uint8(len(stemWire) - 1) // no root label
}

// setDomains records the wire forms derive completes names with.
func (t *table) setDomains(o tableOptions) {
	if o.svcDomain == "" {
		return
	}
	w, err := packName(o.svcDomain + ".")
	if err != nil {
		return
	}
	t.svcWire = []byte(w[:len(w)-1]) // no root label
	if _, err := packName(o.namespace + "."); o.namespace == "" || err != nil || strings.Contains(o.namespace, ".") {
		return
	}
	if w, err = packName(strings.ToLower(o.namespace) + "." + o.svcDomain + "."); err == nil {
		t.nsSvcWire = []byte(w[:len(w)-1])
	}
}

// derive returns the answers of the service the wire name (lower case,
// with its root label) is a short form of, or nil. A completion is looked
// up only when the name could be one: name.ns. must end in a namespace of
// a derived service, name.ns.svc. in svc., and name. have no more labels
// than the short names in the pod's namespace (no Kubernetes name starts
// with an underscore, as SRV's _port._proto. labels do).
func (t *table) derive(name []byte) *nameAnswers {
	if len(t.svcWire) == 0 || len(name) < 2 || name[1] == '_' {
		return nil
	}
	stem := name[:len(name)-1]
	labels, last := 0, 0
	for off := 0; off < len(stem); off += 1 + int(stem[off]) {
		labels, last = labels+1, off
	}
	var buf [maxNameLen + 1]byte
	prev := 0 // where the label before off starts
	for off := 0; off < len(t.svcWire); off += 1 + int(t.svcWire[off]) {
		could := bytes.HasSuffix(stem, t.svcWire[prev:off])
		if off == 0 {
			_, could = t.namespaces[string(stem[last:])]
		}
		prev = off
		if !could {
			continue
		}
		if n := t.completion(buf[:0], stem, t.svcWire[off:]); n != nil && len(stem) >= int(n.base) {
			return n
		}
	}
	if len(t.nsSvcWire) > 0 && labels <= t.shortLabels {
		nsLen := len(t.nsSvcWire) - len(t.svcWire)
		if n := t.completion(buf[:0], stem, t.nsSvcWire); n != nil && len(stem)+nsLen == int(n.base) {
			return n
		}
	}
	return nil
}

// completion returns the answers of the host named stem+suffix (wire
// forms without the root label) when its short forms are derived; buf
// has room for the name.
func (t *table) completion(buf, stem, suffix []byte) *nameAnswers {
	if len(stem)+len(suffix)+1 > maxNameLen {
		return nil
	}
	c := append(append(append(buf, stem...), suffix...), 0)
	n := t.names[string(c)]
	if n == nil || n.base == 0 || n.host != string(c) {
		return nil
	}
	return n
}
