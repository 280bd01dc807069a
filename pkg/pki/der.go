package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"time"
)

// DER tags the leaf encoder writes.
const (
	tagBoolean     = 0x01
	tagInteger     = 0x02
	tagBitString   = 0x03
	tagOctetString = 0x04
	tagNull        = 0x05
	tagOID         = 0x06
	tagUTCTime     = 0x17
	tagGenTime     = 0x18
	tagSequence    = 0x30
)

// derBuf appends DER to one buffer without intermediate allocations:
// open writes a tag and a one-byte length placeholder, close sets the
// length and, for contents of 128 bytes or more, moves them right to make
// room for the long form.
type derBuf struct{ b []byte }

// open starts a constructed value with tag and returns where its contents
// begin, for close.
func (d *derBuf) open(tag byte) int {
	d.b = append(d.b, tag, 0)
	return len(d.b)
}

// close ends the value whose contents began at start.
func (d *derBuf) close(start int) {
	n := len(d.b) - start
	if n < 0x80 {
		d.b[start-1] = byte(n)
		return
	}
	l := 1
	for n>>(8*l) != 0 {
		l++
	}
	for range l {
		d.b = append(d.b, 0)
	}
	copy(d.b[start+l:], d.b[start:start+n])
	d.b[start-1] = 0x80 | byte(l)
	for i := range l {
		d.b[start+i] = byte(n >> (8 * (l - 1 - i)))
	}
}

// header appends a tag and the length n.
func (d *derBuf) header(tag byte, n int) {
	d.b = append(d.b, tag)
	switch {
	case n < 0x80:
		d.b = append(d.b, byte(n))
	case n < 0x100:
		d.b = append(d.b, 0x81, byte(n))
	case n < 0x10000:
		d.b = append(d.b, 0x82, byte(n>>8), byte(n))
	default:
		d.b = append(d.b, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
}

// bytes appends a primitive value.
func (d *derBuf) bytes(tag byte, v []byte) {
	d.header(tag, len(v))
	d.b = append(d.b, v...)
}

// string appends a primitive value given as a string.
func (d *derBuf) string(tag byte, v string) {
	d.header(tag, len(v))
	d.b = append(d.b, v...)
}

// raw appends already encoded DER.
func (d *derBuf) raw(v []byte) { d.b = append(d.b, v...) }

// unsigned appends a non-negative INTEGER given as big-endian bytes: no
// leading zero bytes but one when the top bit is set, as DER requires.
func (d *derBuf) unsigned(v []byte) {
	for len(v) > 0 && v[0] == 0 {
		v = v[1:]
	}
	switch {
	case len(v) == 0:
		d.b = append(d.b, tagInteger, 1, 0)
	case v[0]&0x80 != 0:
		d.header(tagInteger, len(v)+1)
		d.b = append(d.b, 0)
		d.b = append(d.b, v...)
	default:
		d.bytes(tagInteger, v)
	}
}

// time appends UTCTime for 1950-2049 and GeneralizedTime otherwise (RFC
// 5280), in UTC, to the second.
func (d *derBuf) time(t time.Time) {
	t = t.UTC()
	if y := t.Year(); y >= 1950 && y < 2050 {
		d.header(tagUTCTime, 13)
		d.b = t.AppendFormat(d.b, "060102150405Z0700")
	} else {
		d.header(tagGenTime, 15)
		d.b = t.AppendFormat(d.b, "20060102150405Z0700")
	}
}

// Encoded object identifiers and algorithm identifiers of public keys.
var (
	derOIDECPublicKey = []byte{tagOID, 7, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01}       // 1.2.840.10045.2.1
	derOIDP256        = []byte{tagOID, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07} // 1.2.840.10045.3.1.7
	derOIDP384        = []byte{tagOID, 5, 0x2b, 0x81, 0x04, 0x00, 0x22}                   // 1.3.132.0.34
	derRSAEncryption  = []byte{tagSequence, 13,
		tagOID, 9, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, // 1.2.840.113549.1.1.1
		tagNull, 0}
)

// subjectPublicKeyInfo appends pub's SubjectPublicKeyInfo, the bytes
// x509.MarshalPKIXPublicKey returns, encoded directly for the ECDSA P-256
// and P-384 and RSA keys this package issues for and by
// x509.MarshalPKIXPublicKey for any other.
func (d *derBuf) subjectPublicKeyInfo(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		var curve []byte
		switch k.Curve {
		case elliptic.P256():
			curve = derOIDP256
		case elliptic.P384():
			curve = derOIDP384
		default:
			return d.marshalPKIX(pub)
		}
		point, err := k.Bytes()
		if err != nil {
			return err
		}
		spki := d.open(tagSequence)
		alg := d.open(tagSequence)
		d.raw(derOIDECPublicKey)
		d.raw(curve)
		d.close(alg)
		d.header(tagBitString, len(point)+1)
		d.b = append(d.b, 0)
		d.b = append(d.b, point...)
		d.close(spki)
		return nil
	case *rsa.PublicKey:
		if k.N == nil || k.N.Sign() <= 0 || k.E <= 0 {
			return d.marshalPKIX(pub) // for its error
		}
		spki := d.open(tagSequence)
		d.raw(derRSAEncryption)
		bits := d.open(tagBitString)
		d.b = append(d.b, 0)
		seq := d.open(tagSequence)
		var buf [512]byte // room for the modulus of a 4096-bit key
		if n := (k.N.BitLen() + 7) / 8; n <= len(buf) {
			d.unsigned(k.N.FillBytes(buf[:n]))
		} else {
			d.unsigned(k.N.Bytes())
		}
		var e [8]byte
		binary.BigEndian.PutUint64(e[:], uint64(k.E))
		d.unsigned(e[:])
		d.close(seq)
		d.close(bits)
		d.close(spki)
		return nil
	}
	return d.marshalPKIX(pub)
}

func (d *derBuf) marshalPKIX(pub crypto.PublicKey) error {
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	d.raw(spki)
	return nil
}
