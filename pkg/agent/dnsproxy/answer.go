package dnsproxy

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// answer is a response packed once and served many times: the fast path
// copies it, patches the ID, header bits and the client's spelling of the
// question, rotates the address records and ages the TTLs.
type answer struct {
	wire []byte // packed response with ID 0 and the question in lower case
	qEnd int    // offset just past the question in wire

	// Records wire[rotOff:rotOff+rotN*rotSize] are rotRecords of equal size
	// served in turn starting at a different one (address rotation).
	rotOff, rotN, rotSize int
	next                  atomic.Uint32

	// ttlOffs and ttls locate every TTL for aging (cached upstream answers).
	ttlOffs []int
	ttls    []uint32
	stored  time.Duration // server clock when cached
}

// packAnswer packs m as a reusable answer. rotate is the number of trailing
// answer records to rotate (0 or 1 for none).
func packAnswer(m *dns.Msg, rotate int, withTTLs bool) (*answer, error) {
	m.Id = 0
	m.Compress = true
	wire, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("pack answer for %v: %w", m.Question, err)
	}
	spans, err := walkRRs(wire)
	if err != nil {
		return nil, fmt.Errorf("walk packed answer: %w", err)
	}
	a := &answer{wire: wire, qEnd: headerLen}
	if a.qEnd, err = skipName(wire, headerLen); err != nil {
		return nil, err
	}
	a.qEnd += 4
	if rotate > 1 && rotate <= len(m.Answer) {
		first := len(m.Answer) - rotate
		size := spans[first].end - spans[first].start
		same := true
		for _, sp := range spans[first : first+rotate] {
			same = same && sp.end-sp.start == size
		}
		if same {
			a.rotOff, a.rotN, a.rotSize = spans[first].start, rotate, size
		}
	}
	if withTTLs {
		for i, sp := range spans {
			if i >= len(m.Answer)+len(m.Ns) && isOPT(wire, sp) {
				continue
			}
			a.ttlOffs = append(a.ttlOffs, sp.ttlOff)
			a.ttls = append(a.ttls, binary.BigEndian.Uint32(wire[sp.ttlOff:]))
		}
	}
	return a, nil
}

// isOPT reports whether the record at sp is an OPT pseudo-record.
func isOPT(wire []byte, sp rrSpan) bool {
	return sp.ttlOff >= 4 && binary.BigEndian.Uint16(wire[sp.ttlOff-4:]) == typeOPT
}

// appendTo writes the response to q (whose packet is msg) to dst and
// returns it, or nil when it does not fit in limit bytes (then the slow
// path truncates). age is how long ago the answer was cached.
func (a *answer) appendTo(dst []byte, q *query, msg []byte, age time.Duration, limit int) []byte {
	n := len(a.wire)
	if q.edns {
		n += 11
	}
	if n > limit || q.qEnd != a.qEnd {
		return nil
	}
	start := len(dst)
	dst = append(dst, a.wire...)
	out := dst[start:]
	binary.BigEndian.PutUint16(out, q.id)
	flags := binary.BigEndian.Uint16(out[2:])
	flags = flags&^(flagRD|flagCD) | q.flags&(flagRD|flagCD)
	if q.flags&flagAD == 0 && !q.do {
		flags &^= flagAD
	}
	binary.BigEndian.PutUint16(out[2:], flags)
	copy(out[headerLen:a.qEnd], msg[headerLen:a.qEnd])
	if a.rotN > 1 {
		k := int(a.next.Add(1)-1) % a.rotN
		region := a.wire[a.rotOff : a.rotOff+a.rotN*a.rotSize]
		cut := k * a.rotSize
		copy(out[a.rotOff:], region[cut:])
		copy(out[a.rotOff+len(region)-cut:], region[:cut])
	}
	if len(a.ttlOffs) > 0 {
		secs := uint32(age / time.Second)
		for i, off := range a.ttlOffs {
			ttl := a.ttls[i]
			if ttl > secs {
				ttl -= secs
			} else {
				ttl = 0
			}
			binary.BigEndian.PutUint32(out[off:], ttl)
		}
	}
	if q.edns {
		var do uint16
		if q.do {
			do = optDOBit
		}
		dst = append(dst, 0, 0, typeOPT, byte(ourUDPSize>>8), byte(ourUDPSize&0xff), 0, 0, byte(do>>8), 0, 0, 0)
		out = dst[start:]
		binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])+1)
	}
	return dst
}
