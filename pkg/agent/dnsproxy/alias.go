package dnsproxy

import (
	"encoding/binary"
)

// Search-domain aliases. A resolver that walks the pod's search list asks
// for a mesh name with the first search domain appended
// ("reviews.default.svc.cluster.local.default.svc.cluster.local."); the
// proxy answers it with a CNAME to the mesh name and the mesh name's
// addresses, as Istio does. These answers are made when asked, from the
// mesh name's own shared answer, instead of being stored for every name of
// every host: they were half the table.

// aliasCNAMELen is the size of the CNAME record before its target: owner
// pointer, type, class, TTL and RDLENGTH.
const aliasCNAMELen = 2 + 2 + 2 + 4 + 2

// lookup returns the answer the table holds for key (a lookup key: wire
// name in lower case and type), or, for an alias, the target's answer and
// the target's wire name without its root label (a prefix of key). It
// returns nil when the table does not answer.
func (t *table) lookup(key []byte) (a *answer, target []byte) {
	if len(key) < 3 {
		return nil, nil
	}
	name, qtype := splitKey(key)
	switch qtype {
	case typeA, typeAAAA:
	case typePTR:
		return t.ptr(name), nil
	case typeSRV:
		return t.srv(name), nil
	default:
		return nil, nil // the table holds addresses only
	}
	if a := t.find(name, qtype); a != nil {
		return a, nil
	}
	if len(t.search0Wire) == 0 {
		return nil, nil
	}
	cut := len(name) - len(t.search0Wire)
	if cut <= 0 || string(name[cut:]) != string(t.search0Wire) || !labelStart(name, cut) {
		return nil, nil
	}
	var nb [maxNameLen + 1]byte
	tname := append(append(nb[:0], name[:cut]...), 0)
	if a := t.find(tname, qtype); a != nil && a.anyName {
		return a, name[:cut:cut]
	}
	return nil, nil
}

// labelStart reports whether a label of the wire name starts at off.
func labelStart(name []byte, off int) bool {
	i := 0
	for i < off && i < len(name) && name[i] != 0 {
		i += 1 + int(name[i])
	}
	return i == off
}

// appendAliasTo writes the answer to q (whose packet is msg) when q's name
// is an alias of target (a wire name without its root label), whose answer
// is a: a CNAME to target, then a's records owned by target. It returns nil
// when that does not fit in limit bytes.
func (a *answer) appendAliasTo(dst []byte, q *query, msg, target []byte, limit int) []byte {
	targetOff := q.qEnd + aliasCNAMELen
	tlen := len(target) + 1
	n := targetOff + tlen + len(a.wire) - a.qEnd
	if q.edns {
		n += 11
	}
	if n > limit || !a.anyName || targetOff > 0x3fff {
		return nil
	}
	start := len(dst)
	dst = append(dst, a.wire[:headerLen]...)
	dst = append(dst, msg[headerLen:q.qEnd]...)
	dst = append(append(appendMeshRR(dst, typeCNAME, tlen), target...), 0)
	recs := len(dst) - start
	dst = a.appendRecords(dst)
	out := dst[start:]
	setReplyHeader(out, q)
	binary.BigEndian.PutUint16(out[6:], binary.BigEndian.Uint16(out[6:])+1)
	// a's records are owned by the question (a pointer to it); here their
	// owner is the target.
	ptr := 0xc000 | uint16(targetOff)
	for off := recs; off+12 <= len(out); {
		binary.BigEndian.PutUint16(out[off:], ptr)
		off += 12 + int(binary.BigEndian.Uint16(out[off+10:]))
	}
	return appendOPT(dst, start, q)
}
