package nftables

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// attrs appends netlink attributes to a buffer, numbers in network byte
// order as nf_tables reads them. A batch's messages are written into its
// buffer in place: no attribute is built apart and copied in, which made
// encoding a pod's rules cost more than the kernel's commit of them.
type attrs struct {
	b   []byte
	err error // the first nest too long for an attribute's 16-bit length
}

// attr appends the header of an attribute of type typ with n bytes of
// data, then the data's room (zeroed, padded to 4 bytes), and returns that
// room to fill.
func (a *attrs) attr(typ uint16, n int) []byte {
	size := unix.SizeofNlAttr + n
	start := len(a.b)
	a.b = append(a.b, make([]byte, (size+3)&^3)...)
	binary.NativeEndian.PutUint16(a.b[start:], uint16(size))
	binary.NativeEndian.PutUint16(a.b[start+2:], typ)
	return a.b[start+unix.SizeofNlAttr : start+size]
}

func (a *attrs) bytes(typ uint16, v []byte) { copy(a.attr(typ, len(v)), v) }

// str appends s with the NUL the kernel expects after it.
func (a *attrs) str(typ uint16, s string) { copy(a.attr(typ, len(s)+1), s) }

func (a *attrs) u32(typ uint16, v uint32) { binary.BigEndian.PutUint32(a.attr(typ, 4), v) }

// u32Set appends v unless it is zero: the attributes nf_tables reads as
// absent when unset.
func (a *attrs) u32Set(typ uint16, v uint32) {
	if v != 0 {
		a.u32(typ, v)
	}
}

func (a *attrs) u64(typ uint16, v uint64) { binary.BigEndian.PutUint64(a.attr(typ, 8), v) }

// nest opens a nested attribute of type typ; the attributes appended until
// end(start) with the start it returns are its content.
func (a *attrs) nest(typ uint16) (start int) {
	start = len(a.b)
	a.attr(unix.NLA_F_NESTED|typ, 0)
	return start
}

// end closes the nested attribute opened at start.
func (a *attrs) end(start int) {
	n := len(a.b) - start
	if n > 0xffff {
		if a.err == nil {
			a.err = fmt.Errorf("nftables: netlink attribute of type %d is %d bytes, over the 65535 its length can say", binary.NativeEndian.Uint16(a.b[start+2:])&^unix.NLA_F_NESTED, n)
		}
		return
	}
	binary.NativeEndian.PutUint16(a.b[start:], uint16(n))
}

// value appends a nested attribute of type typ holding v as NFTA_DATA_VALUE,
// the form of every constant nf_tables compares, loads or looks up.
func (a *attrs) value(typ uint16, v []byte) {
	n := a.nest(typ)
	a.bytes(unix.NFTA_DATA_VALUE, v)
	a.end(n)
}
