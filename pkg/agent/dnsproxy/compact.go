package dnsproxy

import "strings"

// compact moves the wire forms of the table's answers into one allocation
// and its keys into one string, each of exactly their size. The table is
// built from thousands of small allocations among the build's garbage;
// left there, they pin partly used spans (and each is rounded up to its
// size class). Answers are shared by several keys; each moves once.
func (t *table) compact() {
	keys := make([]string, 0, len(t.answers))
	seen := make(map[*answer]struct{}, len(t.answers))
	wireLen, keyLen := 0, 0
	for k, a := range t.answers {
		keys = append(keys, k)
		keyLen += len(k)
		if _, ok := seen[a]; !ok {
			seen[a] = struct{}{}
			wireLen += len(a.wire)
		}
	}
	wires := make([]byte, 0, wireLen)
	for a := range seen {
		off := len(wires)
		wires = append(wires, a.wire...)
		a.wire = wires[off:len(wires):len(wires)] // full: an append copies
	}
	var b strings.Builder
	b.Grow(keyLen)
	for _, k := range keys {
		b.WriteString(k)
	}
	all := b.String()
	m := make(map[string]*answer, len(keys))
	off := 0
	for _, k := range keys {
		m[all[off:off+len(k)]] = t.answers[k]
		off += len(k)
	}
	t.answers = m
}
