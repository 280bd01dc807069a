package dnsproxy

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

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
		if _, ok := dns.IsDomainName(name); !ok || name == "." {
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
			t.wildcards[name] = rec
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
		t.addAddrs(rec.fqdn, "", rec, log)
		if rec.plain[0] == nil || rec.plain[1] == nil {
			rec.base = 0
		}
		t.own(rec.fqdn, rec)
		for _, name := range rec.names[1:] {
			if rec.base > 0 && slices.Contains(rec.derived, name) && !contested[name] {
				continue
			}
			t.addAddrs(name, "", rec, log)
			t.own(name, rec)
		}
	}
	t.addPTR(recs)
	return t
}

// addAddrs adds the A and AAAA answers for qname; with a target, qname is a
// CNAME to it. Without one, the answers are those of rec's every name.
func (t *table) addAddrs(qname, target string, rec *hostRec, log *slog.Logger) {
	for i, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		addrs := rec.v4
		if qt == dns.TypeAAAA {
			addrs = rec.v6
		}
		if target == "" && rec.plain[i] != nil {
			t.put(qname, qt, rec.plain[i], log)
			continue
		}
		m := meshMsg(qname, qt)
		owner := qname
		if target != "" {
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: meshHdr(qname, dns.TypeCNAME), Target: target})
			owner = target
		}
		m.Answer = append(m.Answer, addrRRs(owner, addrs)...)
		a := t.add(m, len(addrs), log)
		if target == "" && a != nil && ownersPointAtQuestion(a) {
			a.anyName = true
			rec.plain[i] = a
		}
	}
}

// ownersPointAtQuestion reports whether every record of a is owned by the
// question's name through a compression pointer to it, and holds no other
// name (address records): then a serves any name.
func ownersPointAtQuestion(a *answer) bool {
	spans, err := walkRRs(nil, a.wire)
	if err != nil {
		return false
	}
	for _, sp := range spans {
		rrtype := binary.BigEndian.Uint16(a.wire[sp.ttlOff-4:])
		if a.wire[sp.start] != 0xC0 || a.wire[sp.start+1] != headerLen || (rrtype != dns.TypeA && rrtype != dns.TypeAAAA) {
			return false
		}
	}
	return true
}

// add packs m and stores it under its question, unless something else
// already answers that question. It returns the answer stored, or nil.
func (t *table) add(m *dns.Msg, rotate int, log *slog.Logger) *answer {
	q := m.Question[0]
	a, err := packAnswer(m, rotate, false)
	if err == nil {
		var stored bool
		if stored, err = t.set(q.Name, q.Qtype, a); stored {
			return a
		}
	}
	if err != nil {
		log.Warn("skipping unanswerable mesh name", "name", q.Name, "err", err)
	}
	return nil
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

// meshMsg starts an authoritative answer for qname/qtype.
func meshMsg(qname string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.Response, m.Authoritative, m.RecursionAvailable = true, true, true
	m.Question = []dns.Question{{Name: qname, Qtype: qtype, Qclass: dns.ClassINET}}
	return m
}

// meshHdr is the header of a mesh record.
func meshHdr(name string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: meshTTL}
}

// addrRRs makes A or AAAA records for addrs (all of one family).
func addrRRs(owner string, addrs []netip.Addr) []dns.RR {
	out := make([]dns.RR, 0, len(addrs))
	for _, ip := range addrs {
		if ip.Is4() {
			out = append(out, &dns.A{Hdr: meshHdr(owner, dns.TypeA), A: ip.AsSlice()})
		} else {
			out = append(out, &dns.AAAA{Hdr: meshHdr(owner, dns.TypeAAAA), AAAA: ip.AsSlice()})
		}
	}
	return out
}

// canonicalName lower-cases name and adds the trailing dot.
func canonicalName(name string) string {
	return dns.Fqdn(strings.ToLower(strings.TrimSpace(name)))
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
// case followed by the type.
func nameKey(name string, qtype uint16) (string, error) {
	buf := make([]byte, maxNameLen+2)
	n, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		return "", fmt.Errorf("pack name %q: %w", name, err)
	}
	for i, c := range buf[:n] {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return string(append(buf[:n], byte(qtype>>8), byte(qtype))), nil
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
