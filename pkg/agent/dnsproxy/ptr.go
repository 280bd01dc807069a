package dnsproxy

import (
	"bytes"
	"net/netip"
	"slices"
	"sort"
	"strconv"
)

// Reverse lookups. The table keeps each mesh address once, with the
// hosts that have it, and makes the PTR answer when asked: a stored answer
// per address took a quarter of the table for a question seldom asked.

// ptrEntry is a mesh address and one host that has it.
type ptrEntry struct {
	addr [16]byte // IPv4 as IPv4-mapped IPv6
	host string   // the host's name: wire form, lower case
}

// addPTR records every mesh address of recs with the hosts that have it,
// sorted by address and then name (the order of the PTR records).
func (t *table) addPTR(recs []*hostRec) {
	for _, rec := range recs {
		host, err := packName(rec.fqdn)
		if err != nil {
			continue // not a name the table answers either
		}
		for _, ip := range slices.Concat(rec.v4, rec.v6) {
			t.ptrs = append(t.ptrs, ptrEntry{addr: ip.As16(), host: host})
		}
	}
	// sort.Slice, not slices.SortFunc: a generic sort is 12 kB of code per
	// element type, and this one runs once per table.
	sort.Slice(t.ptrs, func(i, j int) bool {
		a, b := &t.ptrs[i], &t.ptrs[j]
		if c := bytes.Compare(a.addr[:], b.addr[:]); c != 0 {
			return c < 0
		}
		return wireName([]byte(a.host)) < wireName([]byte(b.host)) // name order
	})
	t.ptrs = slices.Compact(t.ptrs)
	for i := range t.ptrs {
		if i == 0 || t.ptrs[i].addr != t.ptrs[i-1].addr {
			t.questions++
		}
	}
}

// ptr returns the answer to a PTR question for the wire name (lower
// case, with its root label), or nil when it names no mesh address.
func (t *table) ptr(name []byte) *answer {
	ip, ok := reverseAddr(name)
	if !ok {
		return nil
	}
	a16 := ip.As16()
	i := sort.Search(len(t.ptrs), func(i int) bool { return bytes.Compare(t.ptrs[i].addr[:], a16[:]) >= 0 })
	if i == len(t.ptrs) || t.ptrs[i].addr != a16 {
		return nil
	}
	j := i
	size := headerLen + len(name) + 4
	for ; j < len(t.ptrs) && t.ptrs[j].addr == a16; j++ {
		size += 12 + len(t.ptrs[j].host)
	}
	wire, qEnd := meshAnswer(name, typePTR, j-i, 0, size)
	for _, e := range t.ptrs[i:j] {
		wire = append(appendMeshRR(wire, typePTR, len(e.host)), e.host...)
	}
	return &answer{wire: wire, qEnd: qEnd}
}

// reverseAddr returns the address a reverse name (wire form, lower case)
// stands for, when it is exactly the name dns.ReverseAddr makes of it: four
// decimal labels under in-addr.arpa., or 32 hex nibbles under ip6.arpa.
func reverseAddr(name []byte) (netip.Addr, bool) {
	var labels [34][]byte
	n := 0
	for off := 0; off < len(name) && name[off] != 0; off += 1 + int(name[off]) {
		end := off + 1 + int(name[off])
		if n == len(labels) || end > len(name) {
			return netip.Addr{}, false
		}
		labels[n] = name[off+1 : end]
		n++
	}
	switch {
	case n == 6 && string(labels[4]) == "in-addr" && string(labels[5]) == "arpa":
		var a [4]byte
		for i := range 4 {
			v, err := strconv.Atoi(string(labels[3-i]))
			if err != nil || v < 0 || v > 255 || strconv.Itoa(v) != string(labels[3-i]) {
				return netip.Addr{}, false
			}
			a[i] = byte(v)
		}
		return netip.AddrFrom4(a), true
	case n == 34 && string(labels[32]) == "ip6" && string(labels[33]) == "arpa":
		var a [16]byte
		for i := range 32 {
			l := labels[31-i]
			if len(l) != 1 {
				return netip.Addr{}, false
			}
			var v byte
			switch c := l[0]; {
			case '0' <= c && c <= '9':
				v = c - '0'
			case 'a' <= c && c <= 'f':
				v = c - 'a' + 10
			default:
				return netip.Addr{}, false
			}
			a[i/2] |= v << (4 * (1 - i%2))
		}
		// The table keeps IPv4 addresses as IPv4: a mapped address is
		// no mesh address.
		ip := netip.AddrFrom16(a)
		return ip, !ip.Is4In6()
	}
	return netip.Addr{}, false
}
