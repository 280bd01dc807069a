package dnsproxy

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/miekg/dns"
)

// packSRV packs the SRV answer for qname: one SRV record per port, all
// targeting rec's name, with rec's addresses as additional records. It is
// laid out to serve any name (anyName): the SRV records' owner is a
// pointer to the question and no other name is compressed, so the
// records do not depend on where the question ends.
func packSRV(qname string, ps []ServicePort, rec *hostRec) (*answer, error) {
	extra := append(addrRRs(rec.fqdn, rec.v4), addrRRs(rec.fqdn, rec.v6)...)
	if len(ps)+len(extra) > 0xffff {
		return nil, fmt.Errorf("%d records do not fit one message", len(ps)+len(extra))
	}
	wire := make([]byte, headerLen, 512)
	binary.BigEndian.PutUint16(wire[2:], flagQR|flagAA|flagRA)
	binary.BigEndian.PutUint16(wire[4:], 1)
	binary.BigEndian.PutUint16(wire[6:], uint16(len(ps)))
	binary.BigEndian.PutUint16(wire[10:], uint16(len(extra)))
	wire, err := appendWireName(wire, qname)
	if err != nil {
		return nil, err
	}
	wire = binary.BigEndian.AppendUint16(wire, dns.TypeSRV)
	wire = binary.BigEndian.AppendUint16(wire, dns.ClassINET)
	qEnd := len(wire)
	var rrs []dns.RR
	for _, p := range ps {
		// Owner "." packs as the root label alone; the pointer replaces it.
		rrs = append(rrs, &dns.SRV{Hdr: meshHdr(".", dns.TypeSRV), Weight: 100, Port: p.Port, Target: rec.fqdn})
	}
	rrs = append(rrs, extra...)
	buf := make([]byte, 512) // one SRV or address record at most (272 bytes)
	for i, rr := range rrs {
		n, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("pack %v: %w", rr, err)
		}
		if i < len(ps) {
			wire = append(wire, 0xc0, headerLen)
			wire = append(wire, buf[1:n]...)
		} else {
			wire = append(wire, buf[:n]...)
		}
		if len(wire) > dns.MaxMsgSize {
			return nil, fmt.Errorf("SRV answer for %s exceeds %d bytes", qname, dns.MaxMsgSize)
		}
	}
	return &answer{wire: bytes.Clone(wire), qEnd: qEnd, anyName: true}, nil // to size: tables hold thousands
}

// appendWireName appends name, uncompressed and in lower case, to b.
func appendWireName(b []byte, name string) ([]byte, error) {
	key, err := nameKey(name, 0)
	if err != nil {
		return nil, err
	}
	return append(b, key[:len(key)-2]...), nil
}
