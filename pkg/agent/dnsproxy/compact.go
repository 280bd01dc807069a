package dnsproxy

import (
	"encoding/binary"
	"slices"
	"strings"
)

// compact shrinks the built table to what serving needs, in a few
// allocations of exactly their size. The table is built from thousands of
// small allocations among the build's garbage; left there, they pin partly
// used spans (and each is rounded up to its size class).
//
//   - Answers that serve any name drop their question, and those left the
//     same are one answer: a host without IPv6 answers AAAA like every
//     other such host.
//   - Names with the same answers and host share one list: every name of a
//     host.
//   - The answers, their wire forms, the lists and the names each move into
//     one array; hosts and reverse lookups share the names.
func (t *table) compact() {
	var c compactor
	c.ids = map[*answer]int{}
	c.same = map[string]*answer{}
	lists := map[string]*nameAnswers{}
	var order []*nameAnswers
	var names []string
	for name, n := range t.names {
		sig := c.signature(n)
		if m := lists[string(sig)]; m != nil {
			t.names[name] = m
		} else {
			lists[string(sig)] = n
			order = append(order, n)
		}
		names = append(names, name)
	}

	answers := make([]answer, len(c.order))
	wireLen := 0
	for _, a := range c.order {
		wireLen += len(a.wire)
	}
	wires := make([]byte, 0, wireLen)
	for i, a := range c.order {
		a.moveTo(&answers[i])
		off := len(wires)
		wires = append(wires, a.wire...)
		answers[i].wire = wires[off:len(wires):len(wires)] // full: an append copies
	}

	packedNames := oneString(slices.Clone(names))
	packedName := make(map[string]string, len(names))
	for i, name := range names {
		packedName[name] = packedNames[i]
	}
	shared := func(name string) string {
		if s, ok := packedName[name]; ok {
			return s
		}
		return name
	}

	nTypes := 0
	for _, n := range order {
		nTypes += len(n.types)
	}
	types := make([]typedAnswer, 0, nTypes)
	packed := make([]nameAnswers, len(order))
	to := make(map[*nameAnswers]*nameAnswers, len(order))
	for i, n := range order {
		start := len(types)
		for _, ta := range n.types {
			types = append(types, typedAnswer{qtype: ta.qtype, a: &answers[c.ids[ta.a]]})
		}
		packed[i].types = types[start:len(types):len(types)]
		packed[i].host, packed[i].base = shared(n.host), n.base
		to[n] = &packed[i]
	}
	m := make(map[string]*nameAnswers, len(names))
	for i, name := range names {
		m[packedNames[i]] = to[t.names[name]]
	}
	t.names = m
	t.ptrs = slices.Clone(t.ptrs)
	for i, e := range t.ptrs {
		t.ptrs[i].host = shared(e.host)
	}
}

// compactor numbers the distinct answers of a table.
type compactor struct {
	ids   map[*answer]int    // index in order
	order []*answer          // distinct answers, in the order first seen
	same  map[string]*answer // answers for any name, by their records
	sig   []byte
}

// signature replaces n's answers by their distinct ones and returns what
// identifies the list: its host, types and answer numbers.
func (c *compactor) signature(n *nameAnswers) []byte {
	sig := binary.AppendUvarint(c.sig[:0], uint64(len(n.host)))
	sig = append(sig, n.host...)
	sig = append(sig, n.base)
	for i := range n.types {
		n.types[i].a = c.intern(n.types[i].a)
		sig = binary.BigEndian.AppendUint16(sig, n.types[i].qtype)
		sig = binary.AppendUvarint(sig, uint64(c.ids[n.types[i].a]))
	}
	c.sig = sig
	return sig
}

// intern returns the one answer that stands for a and numbers it. An
// answer for any name never serves its own question, so it is kept
// without it, and is the same as another with the same header, records
// and rotation.
func (c *compactor) intern(a *answer) *answer {
	if a.anyName {
		if a.qEnd != headerLen {
			a.dropQuestion()
		}
		var k [12]byte
		binary.BigEndian.PutUint32(k[:], uint32(a.rotOff))
		binary.BigEndian.PutUint32(k[4:], uint32(a.rotN))
		binary.BigEndian.PutUint32(k[8:], uint32(a.rotSize))
		key := string(k[:]) + string(a.wire)
		if s := c.same[key]; s != nil {
			a = s
		} else {
			c.same[key] = a
		}
	}
	if _, ok := c.ids[a]; !ok {
		c.ids[a] = len(c.order)
		c.order = append(c.order, a)
	}
	return a
}

// oneString puts the strings of ss, in place, in one allocation.
func oneString(ss []string) []string {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ss {
		b.WriteString(s)
	}
	all, off := b.String(), 0
	for i, s := range ss {
		ss[i] = all[off : off+len(s)]
		off += len(s)
	}
	return ss
}
