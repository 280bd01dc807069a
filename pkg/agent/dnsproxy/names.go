package dnsproxy

import "encoding/binary"

// nameAnswers are the answers the table holds for one name, one per
// question type, and the host the name belongs to, whose service ports
// answer SRV (srv.go). A host's names all share one, so the table keeps one
// map entry per name rather than one per name and type.
type nameAnswers struct {
	types []typedAnswer
	host  string // the host's name, wire form, lower case; "" for none
	base  uint8  // the host's hostRec.base: its short forms are derived
}

// typedAnswer is the answer to one question type.
type typedAnswer struct {
	qtype uint16
	a     *answer
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

// find returns the answer for a question of qtype for the wire name (lower
// case, with its root label), or nil.
func (t *table) find(name []byte, qtype uint16) *answer {
	if n := t.entryOf(name); n != nil {
		return n.get(qtype)
	}
	return nil
}

// entryOf returns the answers of the wire name (lower case, with its root
// label), stored or derived, or nil.
func (t *table) entryOf(name []byte) *nameAnswers {
	if n := t.names[string(name)]; n != nil {
		return n
	}
	return t.derive(name)
}

// set stores a under the question (qname, qtype) unless the table already
// answers it, and reports whether it did. Names are kept in wire form,
// lower case (nameKey).
func (t *table) set(qname string, qtype uint16, a *answer) (bool, error) {
	w, err := packName(qname)
	if err != nil {
		return false, err
	}
	n := t.entry(w)
	if n.get(qtype) != nil {
		return false, nil
	}
	n.types = append(n.types, typedAnswer{qtype: qtype, a: a})
	t.questions++
	return true, nil
}

// own records that name belongs to rec, whose ports answer SRV for it.
func (t *table) own(name string, rec *hostRec) {
	nw, err := packName(name)
	if err != nil {
		return
	}
	hw, err := packName(rec.fqdn)
	if err != nil {
		return
	}
	n := t.entry(nw)
	n.host, n.base = hw, rec.base
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
