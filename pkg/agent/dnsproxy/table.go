package dnsproxy

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// meshTTL is the TTL of every answer made from the NameTable (as Istio).
const meshTTL = 30

// registryKubernetes is the NameInfo.Registry of Kubernetes services.
const registryKubernetes = "Kubernetes"

// ServicePort is one port of a mesh service, used for SRV answers. The
// NameTable has no ports; the agent takes them from its clusters.
type ServicePort struct {
	// Name is the port name ("http"); it may be empty.
	Name string
	// Port is the service port number.
	Port uint16
	// Protocol is "tcp" or "udp"; empty means "tcp".
	Protocol string
}

// hostRec is one NameTable host and its addresses by family.
type hostRec struct {
	fqdn   string // canonical: lower case with the trailing dot
	v4, v6 []netip.Addr
	names  []string // every name answered for it (fqdn first)

	plain [2]*answer // the A and AAAA answers every name of it shares

	// derived are the Kubernetes short forms of the name (derivedAlts);
	// when base > 0 they are answered when asked (derive.go) rather than
	// stored: base is the length of name.ns. in wire form.
	derived []string
	base    uint8
}

// table is an immutable snapshot of everything the proxy answers locally.
type table struct {
	ntWire      []byte                  // the NameTable it was built from, encoded
	names       map[string]*nameAnswers // key: lower wire name
	questions   int                     // questions answered (names × types)
	wildcards   map[string]*hostRec     // key: "*.example.com."
	ptrs        []ptrEntry              // mesh addresses and their hosts (ptr.go)
	ports       *portIndex              // service ports, for SRV (srv.go); nil: none
	svcWire     []byte                  // the service domain in wire form, no root label (derive.go)
	nsSvcWire   []byte                  // the pod's namespace and the service domain, the same
	namespaces  map[string]struct{}     // namespace labels (wire) of derived services
	shortLabels int                     // most labels of a derived short name in the pod's namespace
	search0     string                  // first search domain, canonical, or ""
	search0Wire []byte                  // search0 in wire form, lower case
	hosts       int
}

// tableOptions are the pod facts that shape the table.
type tableOptions struct {
	namespace string
	svcDomain string // "svc.cluster.local"
	search    []string
	ports     *portIndex // for SRV; nil: none

	// storeDerived stores the Kubernetes short forms like any other name
	// instead of deriving them when asked (derive.go): the table as it
	// was, which tests compare with.
	storeDerived bool
}

// buildTable precomputes every mesh answer of nt. Bad entries are logged
// and skipped; they never fail the whole table.
func buildTable(nt *nds.NameTable, o tableOptions, log *slog.Logger) *table {
	t := assemble(nt, o, log)
	t.compact()
	return t
}

// assemble makes the table of nt as it is built, before compact.
func assemble(nt *nds.NameTable, o tableOptions, log *slog.Logger) *table {
	t := &table{ntWire: nt.Marshal(), names: map[string]*nameAnswers{}, wildcards: map[string]*hostRec{},
		namespaces: map[string]struct{}{}, ports: o.ports}
	if len(o.search) > 0 {
		t.search0 = canonicalName(o.search[0])
		if w, err := packName(t.search0); err == nil && t.search0 != "." {
			t.search0Wire = []byte(w)
		}
	}
	t.setDomains(o)
	owner := map[string]*hostRec{}
	var recs []*hostRec
	var infos []*nds.NameTable_NameInfo
	for _, h := range sortedKeys(nt.GetTable()) {
		ni := nt.GetTable()[h]
		name := canonicalName(h)
		if _, err := packName(name); err != nil || name == "." {
			log.Warn("skipping invalid host in name table", "host", h)
			continue
		}
		rec := &hostRec{fqdn: name}
		for _, s := range ni.GetIps() {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				log.Warn("skipping invalid address in name table", "host", h, "ip", s)
				continue
			}
			if ip = ip.Unmap(); ip.Is4() {
				rec.v4 = append(rec.v4, ip)
			} else {
				rec.v6 = append(rec.v6, ip)
			}
		}
		if strings.HasPrefix(name, "*.") {
			t.addWildcard(name, rec, log)
			continue
		}
		if _, dup := owner[name]; dup {
			continue
		}
		owner[name] = rec
		rec.names = append(rec.names, name)
		recs, infos = append(recs, rec), append(infos, ni)
	}
	t.hosts = len(recs)
	// Alternative names never override a host's own name; among themselves
	// the first host in name order wins, so the table is deterministic. A
	// short form more than one host claims is stored for the winner, so
	// that deriving it never has to choose.
	contested := map[string]bool{}
	for i, rec := range recs {
		rec.derived = derivedAlts(rec.fqdn, infos[i], o)
		if !o.storeDerived {
			rec.base = t.derivable(rec.fqdn, infos[i], o)
		}
		for _, alt := range altHosts(rec.fqdn, infos[i], o) {
			if _, taken := owner[alt]; !taken {
				owner[alt] = rec
				rec.names = append(rec.names, alt)
			} else {
				contested[alt] = true
			}
		}
	}
	for _, rec := range recs {
		// Each name with the first search domain appended is answered
		// too, made when asked (lookup), and so are the short forms of a
		// host that serves them all from its shared answers.
		t.addAddrs(rec.fqdn, rec, log)
		if rec.plain[0] == nil || rec.plain[1] == nil {
			rec.base = 0
		}
		t.own(rec.fqdn, rec)
		for _, name := range rec.names[1:] {
			if rec.base > 0 && slices.Contains(rec.derived, name) && !contested[name] {
				continue
			}
			t.addAddrs(name, rec, log)
			t.own(name, rec)
		}
	}
	t.addPTR(recs)
	return t
}

// addAddrs adds the A and AAAA answers for qname: those of rec's every
// name.
func (t *table) addAddrs(qname string, rec *hostRec, log *slog.Logger) {
	for i, qt := range [2]uint16{typeA, typeAAAA} {
		if rec.plain[i] == nil {
			a, err := rec.addrAnswer(qname, i)
			if err != nil {
				log.Warn("skipping unanswerable mesh name", "name", qname, "err", err)
				continue
			}
			if stored, err := t.set(qname, qt, a); stored {
				rec.plain[i] = a
			} else if err != nil {
				log.Warn("skipping unanswerable mesh name", "name", qname, "err", err)
			}
			continue
		}
		t.put(qname, qt, rec.plain[i], log)
	}
}

// addWildcard adds the wildcard host name ("*.example.com.") and the
// answers every name it covers shares.
func (t *table) addWildcard(name string, rec *hostRec, log *slog.Logger) {
	for i := range rec.plain {
		a, err := rec.addrAnswer(name, i)
		if err != nil {
			log.Warn("skipping unanswerable mesh name", "name", name, "err", err)
			return
		}
		rec.plain[i] = a
	}
	t.wildcards[name] = rec
}

// addrAnswer is rec's A (family 0) or AAAA (1) answer for qname.
func (rec *hostRec) addrAnswer(qname string, family int) (*answer, error) {
	w, err := packName(qname)
	if err != nil {
		return nil, err
	}
	if family == 0 {
		return addrAnswer([]byte(w), typeA, rec.v4)
	}
	return addrAnswer([]byte(w), typeAAAA, rec.v6)
}

// put stores a, an answer for any name, under qname, unless something
// else already answers that question.
func (t *table) put(qname string, qtype uint16, a *answer, log *slog.Logger) {
	if _, err := t.set(qname, qtype, a); err != nil {
		log.Warn("skipping unanswerable mesh name", "name", qname, "err", err)
	}
}

// wildcard returns the most specific wildcard host covering qname.
func (t *table) wildcard(qname string) *hostRec {
	for name := qname; ; {
		i := strings.IndexByte(name, '.')
		if i < 0 || i == len(name)-1 {
			return nil
		}
		name = name[i+1:]
		if rec := t.wildcards["*."+name]; rec != nil {
			return rec
		}
	}
}

// altHosts lists the other names of a host: the NameTable's alt_hosts and
// its Kubernetes short forms (derivedAlts).
func altHosts(fqdn string, ni *nds.NameTable_NameInfo, o tableOptions) []string {
	var out []string
	for _, h := range ni.GetAltHosts() {
		out = append(out, canonicalName(h))
	}
	return append(out, derivedAlts(fqdn, ni, o)...)
}

// derivedAlts lists the short forms of a Kubernetes service in this
// cluster's domain: name.ns., name. (same namespace only) and name.ns.svc.,
// name.ns.svc.cluster. and so on.
func derivedAlts(fqdn string, ni *nds.NameTable_NameInfo, o tableOptions) []string {
	short, ns := strings.ToLower(ni.GetShortname()), strings.ToLower(ni.GetNamespace())
	if !strings.EqualFold(ni.GetRegistry(), registryKubernetes) || short == "" || ns == "" ||
		o.svcDomain == "" || !strings.HasSuffix(fqdn, "."+o.svcDomain+".") {
		return nil
	}
	base := short + "." + ns
	out := []string{base + "."}
	if ns == strings.ToLower(o.namespace) {
		out = append(out, short+".")
	}
	parts := strings.Split(o.svcDomain, ".")
	for _, p := range parts[:len(parts)-1] {
		base += "." + p
		out = append(out, base+".")
	}
	return out
}

// canonicalName lower-cases name and adds the trailing dot.
func canonicalName(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// packName is name in wire form, lower case, with its root label: a
// lookup key without its type.
func packName(name string) (string, error) {
	key, err := nameKey(name, 0)
	if err != nil {
		return "", err
	}
	return key[:len(key)-2], nil
}

// nameKey is the lookup key of a question: its wire-format name in lower
// case followed by the type. name is a domain name in the dotted form,
// the trailing dot optional; escapes (RFC 1035 5.1) are refused, since no
// mesh host has them.
func nameKey(name string, qtype uint16) (string, error) {
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	buf := make([]byte, 0, len(name)+3)
	if name != "." {
		for rest := name; rest != ""; {
			i := strings.IndexByte(rest, '.')
			label := rest[:i]
			rest = rest[i+1:]
			switch {
			case label == "":
				return "", fmt.Errorf("name %q: empty label", name)
			case len(label) > 63:
				return "", fmt.Errorf("name %q: label longer than 63 octets", name)
			case strings.IndexByte(label, '\\') >= 0:
				return "", fmt.Errorf("name %q: escapes are not supported", name)
			}
			buf = append(buf, byte(len(label)))
			for j := range len(label) {
				c := label[j]
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				buf = append(buf, c)
			}
		}
	}
	buf = append(buf, 0)
	if len(buf) > maxNameLen {
		return "", fmt.Errorf("name %q: longer than 255 octets", name)
	}
	return string(append(buf, byte(qtype>>8), byte(qtype))), nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
