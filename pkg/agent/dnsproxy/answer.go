package dnsproxy

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
)

// answer is a response packed once and served many times: the fast path
// copies it, patches the ID, header bits and the client's spelling of the
// question, rotates the address records and ages the TTLs. A mesh table
// holds tens of thousands, so it is kept small.
type answer struct {
	wire []byte // packed response with ID 0 and the question in lower case
	qEnd int    // offset just past the question in wire

	// Records wire[rotOff:rotOff+rotN*rotSize] are rotN records of equal
	// size served in turn starting at a different one (address rotation).
	rotOff, rotN, rotSize int32
	next                  atomic.Uint32

	// anyName: the records name the question only through compression
	// pointers to its start, so the answer serves a question of any name
	// (of its type): every name of a mesh host shares one.
	anyName bool

	// age locates every TTL for aging; nil for mesh answers.
	age *aging
}

// meshAnswer starts the wire form of an authoritative mesh answer to the
// question (a wire name and qtype) with an answer and ar additional
// records, with room for size bytes in all. It returns the wire form and
// where the question ends.
func meshAnswer(name []byte, qtype uint16, an, ar, size int) ([]byte, int) {
	wire := make([]byte, headerLen, max(size, headerLen+len(name)+4))
	binary.BigEndian.PutUint16(wire[2:], flagQR|flagAA|flagRA)
	binary.BigEndian.PutUint16(wire[4:], 1)
	binary.BigEndian.PutUint16(wire[6:], uint16(an))
	binary.BigEndian.PutUint16(wire[10:], uint16(ar))
	wire = append(wire, name...)
	wire = binary.BigEndian.AppendUint16(wire, qtype)
	wire = append(wire, 0, classINET)
	return wire, len(wire)
}

// appendMeshRR appends the head of a mesh record of rrtype owned by the
// question (a pointer to it) with TTL meshTTL and rdlen bytes of data,
// which follow.
func appendMeshRR(b []byte, rrtype uint16, rdlen int) []byte {
	b = append(b, 0xc0, headerLen, byte(rrtype>>8), byte(rrtype), 0, classINET, 0, 0, 0, meshTTL)
	return binary.BigEndian.AppendUint16(b, uint16(rdlen))
}

// moveTo copies a to dst, which must be unused: every field, the rotation
// counter by value.
func (a *answer) moveTo(dst *answer) {
	dst.wire, dst.qEnd = a.wire, a.qEnd
	dst.rotOff, dst.rotN, dst.rotSize = a.rotOff, a.rotN, a.rotSize
	dst.next.Store(a.next.Load())
	dst.anyName, dst.age = a.anyName, a.age
}

// dropQuestion removes the question from the wire form of an answer for
// any name (which serves the client's question, never its own): the
// records follow the header.
func (a *answer) dropQuestion() {
	cut := int32(a.qEnd - headerLen)
	a.wire = append(a.wire[:headerLen:headerLen], a.wire[a.qEnd:]...)
	a.qEnd = headerLen
	if a.rotN > 1 {
		a.rotOff -= cut
	}
}

// aging is what a cached answer needs to age its TTLs.
type aging struct {
	ttls   []ttlAt
	stored time.Duration // server clock when cached
}

// ttlAt is one TTL of an answer and where it is in the wire form.
type ttlAt struct {
	off int32
	ttl uint32
}

// stored is when a was cached (zero for mesh answers).
func (a *answer) stored() time.Duration {
	if a.age == nil {
		return 0
	}
	return a.age.stored
}

// addrAnswer is the mesh answer to an A or AAAA question (qtype) for
// the wire name: a record for each address, of one family, owned by the
// question through a pointer to it, and served in turn starting at a
// different one. Its records name nothing else, so it serves any name.
func addrAnswer(name []byte, qtype uint16, addrs []netip.Addr) (*answer, error) {
	size := 4
	if qtype == typeAAAA {
		size = 16
	}
	n := headerLen + len(name) + 4 + len(addrs)*(12+size)
	if n > maxMsgSize {
		return nil, fmt.Errorf("%d addresses make a message of %d bytes", len(addrs), n)
	}
	wire, qEnd := meshAnswer(name, qtype, len(addrs), 0, n)
	for _, ip := range addrs {
		wire = appendMeshRR(wire, qtype, size)
		if size == 4 {
			a4 := ip.As4()
			wire = append(wire, a4[:]...)
		} else {
			a16 := ip.As16()
			wire = append(wire, a16[:]...)
		}
	}
	a := &answer{wire: wire, qEnd: qEnd, anyName: true}
	if len(addrs) > 1 {
		a.rotOff, a.rotN, a.rotSize = int32(qEnd), int32(len(addrs)), int32(12+size)
	}
	return a, nil
}

// rcodeAnswer is an answer with rcode and no records to the query q
// (whose packet is pkt), with its opcode and every question it asked:
// for errors, served with appendTo.
func rcodeAnswer(q *query, pkt []byte, rcode int) *answer {
	out := make([]byte, q.qEnd)
	copy(out[4:], pkt[4:q.qEnd])
	binary.BigEndian.PutUint16(out[2:], flagQR|flagRA|q.flags&flagOpcode|uint16(rcode&rcodeMax))
	clear(out[6:headerLen])
	return &answer{wire: out, qEnd: q.qEnd}
}

// isOPT reports whether the record at sp is an OPT pseudo-record.
func isOPT(wire []byte, sp rrSpan) bool {
	return sp.ttlOff >= 4 && binary.BigEndian.Uint16(wire[sp.ttlOff-4:]) == typeOPT
}

// appendTo writes the response to q (whose packet is msg) to dst and
// returns it, or nil when it does not fit in limit bytes (then the slow
// path truncates). age is how long ago the answer was cached.
func (a *answer) appendTo(dst []byte, q *query, msg []byte, age time.Duration, limit int) []byte {
	// shift is how far the client's question moves the records.
	shift := q.qEnd - a.qEnd
	if shift != 0 && !a.anyName {
		return nil
	}
	n := len(a.wire) + shift
	if q.edns {
		n += 11
	}
	if n > limit {
		return nil
	}
	start := len(dst)
	dst = append(dst, a.wire[:headerLen]...)
	dst = append(dst, msg[headerLen:q.qEnd]...)
	dst = a.appendRecords(dst)
	out := dst[start:]
	setReplyHeader(out, q)
	if a.age != nil {
		secs := uint32(age / time.Second)
		for _, t := range a.age.ttls {
			ttl := t.ttl
			if ttl > secs {
				ttl -= secs
			} else {
				ttl = 0
			}
			binary.BigEndian.PutUint32(out[int(t.off)+shift:], ttl)
		}
	}
	return appendOPT(dst, start, q)
}

// appendTruncated is appendTo, or with a target appendAliasTo, for an
// answer too big for limit bytes: its names compressed where they were not
// (compressRecords), then as many of its records as fit with the OPT
// record, in order (answers, authority, additional), and TC set when any
// is left out, as miekg/dns's Truncate does for Istio's agent. It returns
// nil only when q cannot take a's records at all.
func (a *answer) appendTruncated(dst []byte, q *query, msg []byte, age time.Duration, target []byte, limit int) []byte {
	whole := *q
	whole.edns = false
	start := len(dst)
	if target != nil {
		dst = a.appendAliasTo(dst, &whole, msg, target, 1<<30)
	} else {
		dst = a.appendTo(dst, &whole, msg, age, 1<<30)
	}
	if dst == nil {
		return nil
	}
	out := dst[start:]
	budget := max(limit, minUDPSize)
	if q.edns {
		budget -= 11
	}
	var spanBuf [16]rrSpan
	spans, err := walkRRs(spanBuf[:0], out)
	if err != nil {
		return nil
	}
	if len(out) > budget {
		if c := compressRecords(out, q.qEnd, spans); c != nil && len(c) < len(out) {
			dst = append(dst[:start], c...)
			out = dst[start:]
			if spans, err = walkRRs(spans[:0], out); err != nil {
				return nil
			}
		}
	}
	keep, end := 0, q.qEnd
	for keep < len(spans) && spans[keep].end <= budget {
		end = spans[keep].end
		keep++
	}
	if keep < len(spans) {
		an := min(int(binary.BigEndian.Uint16(out[6:])), keep)
		ns := min(int(binary.BigEndian.Uint16(out[8:])), keep-an)
		binary.BigEndian.PutUint16(out[2:], binary.BigEndian.Uint16(out[2:])|flagTC)
		binary.BigEndian.PutUint16(out[6:], uint16(an))
		binary.BigEndian.PutUint16(out[8:], uint16(ns))
		binary.BigEndian.PutUint16(out[10:], uint16(keep-an-ns))
		dst = dst[:start+end]
	}
	return appendOPT(dst, start, q)
}

// appendRecords appends a's records (all that follows its question) to
// dst, the address records rotated.
func (a *answer) appendRecords(dst []byte) []byte {
	recStart := len(dst)
	dst = append(dst, a.wire[a.qEnd:]...)
	if a.rotN > 1 {
		rotOff, rotN, rotSize := int(a.rotOff), int(a.rotN), int(a.rotSize)
		k := int(a.next.Add(1)-1) % rotN
		region := a.wire[rotOff : rotOff+rotN*rotSize]
		cut := k * rotSize
		at := recStart + rotOff - a.qEnd
		copy(dst[at:], region[cut:])
		copy(dst[at+len(region)-cut:], region[:cut])
	}
	return dst
}

// setReplyHeader makes out's header that of the reply to q: its ID, and
// its RD and CD bits; AD only if q asked for it (or for DNSSEC).
func setReplyHeader(out []byte, q *query) {
	binary.BigEndian.PutUint16(out, q.id)
	flags := binary.BigEndian.Uint16(out[2:])
	flags = flags&^(flagRD|flagCD) | q.flags&(flagRD|flagCD)
	if q.flags&flagAD == 0 && !q.do {
		flags &^= flagAD
	}
	binary.BigEndian.PutUint16(out[2:], flags)
}

// appendOPT appends our OPT record to the reply at dst[start:] when q has
// EDNS0.
func appendOPT(dst []byte, start int, q *query) []byte {
	if !q.edns {
		return dst
	}
	var do uint16
	if q.do {
		do = optDOBit
	}
	dst = append(dst, 0, 0, typeOPT, byte(ourUDPSize>>8), byte(ourUDPSize&0xff), 0, 0, byte(do>>8), 0, 0, 0)
	out := dst[start:]
	binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])+1)
	return dst
}
