package dnsproxy

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// nameAnswers are the answers the table holds for one name: one per
// question type, and the SRV answers of the _port._proto. names under it
// (SRV for "_http._tcp.reviews.default." is found under
// "reviews.default."). A host's names all share one, so the table keeps
// one map entry per name rather than one per name, type and port label.
type nameAnswers struct {
	types []typedAnswer
	srv   []labelledAnswer
}

// typedAnswer is the answer to one question type.
type typedAnswer struct {
	qtype uint16
	a     *answer
}

// labelledAnswer is the SRV answer for the name with two labels before it,
// such as _8080._tcp; labels is their wire form, lower case.
type labelledAnswer struct {
	labels string
	a      *answer
}

// get returns the answer for qtype, or nil.
func (n *nameAnswers) get(qtype uint16) *answer {
	for _, t := range n.types {
		if t.qtype == qtype {
			return t.a
		}
	}
	return nil
}

// labelled returns the SRV answer under labels (wire form), or nil.
func (n *nameAnswers) labelled(labels []byte) *answer {
	for _, l := range n.srv {
		if l.labels == string(labels) {
			return l.a
		}
	}
	return nil
}

// find returns the answer for a question of qtype for the wire name (lower
// case, with its root label), or nil.
func (t *table) find(name []byte, qtype uint16) *answer {
	if n := t.names[string(name)]; n != nil {
		if a := n.get(qtype); a != nil {
			return a
		}
	}
	if qtype != dns.TypeSRV {
		return nil
	}
	if p := srvLabels(name); p > 0 {
		if n := t.names[string(name[p:])]; n != nil {
			return n.labelled(name[:p])
		}
	}
	return nil
}

// srvLabels returns the length of the two leading labels of the wire name
// when both start with an underscore (as in _http._tcp.) and a name
// follows them, or 0.
func srvLabels(name []byte) int {
	off := 0
	for range 2 {
		if off >= len(name) || name[off] == 0 || off+1 >= len(name) || name[off+1] != '_' {
			return 0
		}
		off += 1 + int(name[off])
	}
	if off >= len(name) || name[off] == 0 {
		return 0
	}
	return off
}

// set stores a under the question (qname, qtype) unless the table already
// answers it, and reports whether it did. Names are kept in wire form,
// lower case (nameKey).
func (t *table) set(qname string, qtype uint16, a *answer) (bool, error) {
	key, err := nameKey(qname, 0)
	if err != nil {
		return false, err
	}
	name := key[:len(key)-2]
	if qtype == dns.TypeSRV {
		if p := srvLabels([]byte(name)); p > 0 {
			if t.find([]byte(name), qtype) != nil {
				return false, nil
			}
			n := t.entry(name[p:])
			n.srv = append(n.srv, labelledAnswer{labels: name[:p], a: a})
			t.questions++
			return true, nil
		}
	}
	n := t.entry(name)
	if n.get(qtype) != nil {
		return false, nil
	}
	n.types = append(n.types, typedAnswer{qtype: qtype, a: a})
	t.questions++
	return true, nil
}

// entry returns the answers of the wire name, adding them if new.
func (t *table) entry(name string) *nameAnswers {
	n := t.names[name]
	if n == nil {
		n = &nameAnswers{}
		t.names[name] = n
	}
	return n
}

// splitKey splits a lookup key into its wire name and question type.
func splitKey(key []byte) ([]byte, uint16) {
	return key[:len(key)-2], binary.BigEndian.Uint16(key[len(key)-2:])
}
