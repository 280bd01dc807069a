package dnsproxy

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// SRV answers are made when asked, from the service ports of the host a
// name belongs to: the bare name is answered with every port, and
// _port._proto.name or _portname._proto.name with the first port that
// matches. Ports change with every cluster update and SRV questions are
// rare, so the ports are kept apart from the table (ports.go) and no
// answer is stored for them.

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

// srv returns the SRV answer for the wire name (lower case, with its root
// label), or nil when the table does not answer it.
func (t *table) srv(name []byte) *answer {
	if t.ports == nil {
		return nil
	}
	n := t.entryOf(name)
	var labels []byte
	if n == nil {
		p := srvLabels(name)
		if p == 0 {
			return nil
		}
		labels, n = name[:p], t.entryOf(name[p:])
		if n == nil {
			return nil
		}
	}
	ps := t.ports.of(n.host)
	if labels != nil {
		ps = matchPort(ps, labels)
	}
	if len(ps) == 0 {
		return nil
	}
	return packSRV(name, ps, n)
}

// matchPort returns the first of ps that labels (wire form, lower case:
// _port or _portname, then _proto) name, as a one-port slice, or nil.
func matchPort(ps []ServicePort, labels []byte) []ServicePort {
	second := 1 + int(labels[0])
	first := labels[2:second]
	proto := string(labels[second+2 : second+1+int(labels[second])])
	for i, p := range ps {
		pproto := strings.ToLower(p.Protocol)
		if pproto == "" {
			pproto = "tcp"
		}
		if proto != pproto {
			continue
		}
		var num [5]byte
		if string(first) == string(strconv.AppendUint(num[:0], uint64(p.Port), 10)) || (p.Name != "" && string(first) == strings.ToLower(p.Name)) {
			return ps[i : i+1]
		}
	}
	return nil
}

// packSRV packs the SRV answer for the wire name: one SRV record per port,
// all targeting n's host, with the host's addresses (the records of n's A
// and AAAA answers) as additional records owned by the target through a
// pointer.
func packSRV(name []byte, ps []ServicePort, n *nameAnswers) *answer {
	var addrs [2]*answer
	nExtra, extraLen := 0, 0
	for i, qt := range []uint16{typeA, typeAAAA} {
		if a := n.get(qt); a != nil && a.anyName {
			addrs[i] = a
			nExtra += int(binary.BigEndian.Uint16(a.wire[6:]))
			extraLen += len(a.wire) - a.qEnd
		}
	}
	host := n.host
	if len(ps) > 0xffff || nExtra > 0xffff {
		return nil
	}
	wire, qEnd := meshAnswer(name, typeSRV, len(ps), nExtra, headerLen+len(name)+4+len(ps)*(18+len(host))+extraLen)
	targetOff := 0
	for _, p := range ps {
		wire = appendMeshRR(wire, typeSRV, 6+len(host))
		wire = append(wire, 0, 0, 0, 100) // priority 0, weight 100
		wire = binary.BigEndian.AppendUint16(wire, p.Port)
		if targetOff == 0 {
			targetOff = len(wire)
		}
		wire = append(wire, host...)
	}
	if targetOff > 0x3fff {
		return nil
	}
	// The address records are owned through a pointer to the question;
	// here, to the target.
	ptr := 0xc000 | uint16(targetOff)
	for _, a := range addrs {
		if a == nil {
			continue
		}
		start := len(wire)
		wire = append(wire, a.wire[a.qEnd:]...)
		for off := start; off+12 <= len(wire); off += 12 + int(binary.BigEndian.Uint16(wire[off+10:])) {
			binary.BigEndian.PutUint16(wire[off:], ptr)
		}
	}
	if len(wire) > maxMsgSize {
		return nil
	}
	return &answer{wire: wire, qEnd: qEnd}
}
