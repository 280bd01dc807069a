package dnsproxy

import (
	"encoding/binary"
	"slices"
)

// compressRecords packs msg again with its names compressed, as miekg/dns
// packs an answer it has to cut for Istio's agent, so that an upstream
// that does not compress loses no more records to a small client than it
// must. msg is a whole message: header, questions ending at qEnd, and the
// records at spans. Owner names, and the names inside NS, CNAME, PTR, MX
// and SOA data (RFC 1035 4.1.4), point to the longest earlier suffix; an
// SRV target is written whole (RFC 2782). It returns nil, and the caller
// keeps msg, when a record's type is not one of those or A, AAAA and TXT:
// the data of other types may hold names whose pointers would point wrong
// once the records before them move. It also returns nil when every
// owner name is a pointer already: the upstream compressed.
func compressRecords(msg []byte, qEnd int, spans []rrSpan) []byte {
	if !slices.ContainsFunc(spans, func(sp rrSpan) bool { return msg[sp.start] != 0 && msg[sp.start]&0xC0 == 0 }) {
		return nil
	}
	c := compressor{out: make([]byte, 0, len(msg)), seen: map[string]int{}}
	c.out = append(c.out, msg[:qEnd]...)
	off := headerLen
	for range binary.BigEndian.Uint16(msg[4:]) {
		name, next, err := appendName(c.name[:0], msg, off)
		if err != nil {
			return nil
		}
		c.remember(name, off, literalLen(msg, off))
		off = next + 4
	}
	for _, sp := range spans {
		head := sp.ttlOff - 4 // type, class, TTL and data length
		name, _, err := appendName(c.name[:0], msg, sp.start)
		if err != nil {
			return nil
		}
		c.write(name)
		data, end := head+10, sp.end
		rrtype := binary.BigEndian.Uint16(msg[head:])
		switch rrtype {
		case typeA, typeAAAA, typeTXT:
			c.out = append(c.out, msg[head:end]...)
			continue
		}
		c.out = append(c.out, msg[head:head+8]...)
		lenAt := len(c.out)
		c.out = append(c.out, 0, 0)
		var names int // names in the data, after fixed
		fixed := 0
		switch rrtype {
		case typeNS, typeCNAME, typePTR:
			names = 1
		case typeMX:
			fixed, names = 2, 1
		case typeSRV:
			fixed, names = 6, 1
		case typeSOA:
			names = 2
		default:
			return nil
		}
		if data+fixed > end {
			return nil
		}
		c.out = append(c.out, msg[data:data+fixed]...)
		at := data + fixed
		for range names {
			if name, at, err = appendName(c.name[:0], msg, at); err != nil {
				return nil
			}
			if rrtype == typeSRV {
				c.remember(name, len(c.out), len(name)-1)
				c.out = append(c.out, name...)
			} else {
				c.write(name)
			}
		}
		if rrtype == typeSOA && at+20 <= end { // serial, refresh, retry, expire, minimum
			c.out = append(c.out, msg[at:at+20]...)
			at += 20
		}
		if at != end || len(c.out)-lenAt-2 > 0xffff {
			return nil
		}
		binary.BigEndian.PutUint16(c.out[lenAt:], uint16(len(c.out)-lenAt-2))
	}
	return c.out
}

// compressor writes names compressed against the names written before.
type compressor struct {
	out  []byte
	seen map[string]int // a name's suffix, uncompressed, to where it is in out
	name [maxNameLen + 1]byte
}

// write appends the uncompressed name: its labels up to the longest
// suffix already written, then a pointer to that suffix.
func (c *compressor) write(name []byte) {
	at := len(c.out)
	for i := 0; name[i] != 0; i += int(name[i]) + 1 {
		if to, ok := c.seen[string(name[i:])]; ok {
			c.out = append(c.out, name[:i]...)
			c.out = append(c.out, 0xC0|byte(to>>8), byte(to))
			c.remember(name, at, i)
			return
		}
	}
	c.out = append(c.out, name...)
	c.remember(name, at, len(name)-1)
}

// remember notes the suffixes of name that start in its first literal
// bytes, written at offset at, where a pointer can reach them.
func (c *compressor) remember(name []byte, at, literal int) {
	for i := 0; i < literal && name[i] != 0 && at+i <= 0x3fff; i += int(name[i]) + 1 {
		if _, ok := c.seen[string(name[i:])]; !ok {
			c.seen[string(name[i:])] = at + i
		}
	}
}

// literalLen is how many bytes of the name at off in msg are labels
// written out, before its end or a pointer.
func literalLen(msg []byte, off int) int {
	n := 0
	for off+n < len(msg) && msg[off+n] != 0 && msg[off+n]&0xC0 == 0 {
		n += int(msg[off+n]) + 1
	}
	return n
}
