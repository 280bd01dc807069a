package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/asn1"
	"fmt"
)

// Object identifiers of the leaf encoder.
var (
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage      = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidAuthorityKeyID   = asn1.ObjectIdentifier{2, 5, 29, 35}
	oidSubjectAltName   = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidServerAuth       = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
	oidClientAuth       = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 2}
	oidECDSAWithSHA256  = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	oidECDSAWithSHA384  = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}
	oidSHA256WithRSA    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
)

// Encoded pieces of every leaf, made once from the object identifiers
// above.
var (
	derAlgECDSAWithSHA256 = algorithmIdentifier(oidECDSAWithSHA256, false)
	derAlgECDSAWithSHA384 = algorithmIdentifier(oidECDSAWithSHA384, false)
	derAlgSHA256WithRSA   = algorithmIdentifier(oidSHA256WithRSA, true)
	derOIDAuthorityKeyID  = mustMarshal(oidAuthorityKeyID)
	derOIDSubjectAltName  = mustMarshal(oidSubjectAltName)
	derTrue               = []byte{tagBoolean, 1, 0xff}
	// keyUsage digitalSignature (bit 0), and keyEncipherment (bit 2) for
	// RSA keys. DER drops trailing zero bits of a named bit list: the
	// first octet counts the unused bits.
	derKeyUsageEC  = extension(oidKeyUsage, true, []byte{tagBitString, 2, 7, 0x80})
	derKeyUsageRSA = extension(oidKeyUsage, true, []byte{tagBitString, 2, 5, 0xa0})
	derExtKeyUsage = extension(oidExtKeyUsage, false, sequence(mustMarshal(oidServerAuth), mustMarshal(oidClientAuth)))
	// basicConstraints: not a CA (the empty sequence).
	derBasicConstraints = extension(oidBasicConstraints, true, sequence())
	derEmptySequence    = sequence()
	derVersion3         = []byte{0xa0, 3, tagInteger, 1, 2}
)

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sequence(parts ...[]byte) []byte {
	var d derBuf
	seq := d.open(tagSequence)
	for _, p := range parts {
		d.raw(p)
	}
	d.close(seq)
	return d.b
}

// algorithmIdentifier encodes an AlgorithmIdentifier: RSA algorithms carry
// NULL parameters, ECDSA ones none.
func algorithmIdentifier(oid asn1.ObjectIdentifier, null bool) []byte {
	if null {
		return sequence(mustMarshal(oid), []byte{tagNull, 0})
	}
	return sequence(mustMarshal(oid))
}

// extension encodes an Extension whose extnValue holds value.
func extension(oid asn1.ObjectIdentifier, critical bool, value []byte) []byte {
	var d derBuf
	ext := d.open(tagSequence)
	d.raw(mustMarshal(oid))
	if critical {
		d.raw(derTrue)
	}
	d.bytes(tagOctetString, value)
	d.close(ext)
	return d.b
}

// IssueLeafDER signs a leaf (end-entity) certificate for pub and returns its
// DER. It is Issue's fast path for leaves: the certificate is encoded
// directly into one buffer (no reflection; the parts every leaf shares are
// encoded once) and signed once, without x509.CreateCertificate's
// verification of its own signature, which costs as much as a second
// signature check per certificate. The result is the certificate Issue
// makes for the same options (tests check both decode alike and verify).
func (is *Issuer) IssueLeafDER(pub crypto.PublicKey, opts LeafOptions) ([]byte, error) {
	if opts.IsCA {
		return nil, fmt.Errorf("%w: IssueLeafDER issues leaves only", ErrInvalid)
	}
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("%w: certificate lifetime %v is not positive", ErrInvalid, opts.TTL)
	}
	sigAlg, hash, err := signatureAlgorithm(is.Key.Public())
	if err != nil {
		return nil, err
	}
	var serial [16]byte
	if _, err := rand.Read(serial[:]); err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	serial[0] &= 0x7f // positive, 127 bits as NewSerial
	notBefore := opts.NotBefore.Add(-ClockSkew)
	notAfter := opts.NotBefore.Add(opts.TTL)
	if notAfter.After(is.Cert.NotAfter) {
		notAfter = is.Cert.NotAfter
	}
	var subject []byte
	if len(opts.Subject.ToRDNSequence()) > 0 {
		if subject, err = asn1.Marshal(opts.Subject.ToRDNSequence()); err != nil {
			return nil, fmt.Errorf("encode subject: %w", err)
		}
	}
	hasSANs := len(opts.URIs)+len(opts.DNSNames)+len(opts.IPAddresses) > 0
	if subject == nil && !hasSANs {
		return nil, fmt.Errorf("%w: a certificate needs a subject or a subject alternative name", ErrInvalid)
	}
	keyUsage := derKeyUsageEC
	if _, isRSA := pub.(*rsa.PublicKey); isRSA {
		keyUsage = derKeyUsageRSA
	}

	d := derBuf{b: make([]byte, 0, 1024+len(is.Cert.RawSubject)+len(subject))}
	cert := d.open(tagSequence)
	tbsStart := len(d.b)
	tbs := d.open(tagSequence)
	d.raw(derVersion3)
	d.unsigned(serial[:])
	d.raw(sigAlg)
	d.raw(is.Cert.RawSubject)
	validity := d.open(tagSequence)
	d.time(notBefore)
	d.time(notAfter)
	d.close(validity)
	if subject != nil {
		d.raw(subject)
	} else {
		d.raw(derEmptySequence)
	}
	if err := d.subjectPublicKeyInfo(pub); err != nil {
		return nil, fmt.Errorf("%w: encode public key: %v", ErrInvalid, err)
	}
	exts := d.open(0xa3) // [3] EXPLICIT
	extList := d.open(tagSequence)
	d.raw(keyUsage)
	d.raw(derExtKeyUsage)
	d.raw(derBasicConstraints)
	if len(is.Cert.SubjectKeyId) > 0 {
		ext := d.open(tagSequence)
		d.raw(derOIDAuthorityKeyID)
		val := d.open(tagOctetString)
		aki := d.open(tagSequence)
		d.bytes(0x80, is.Cert.SubjectKeyId) // [0] keyIdentifier
		d.close(aki)
		d.close(val)
		d.close(ext)
	}
	if hasSANs {
		// Critical when the subject is empty (RFC 5280 4.2.1.6).
		ext := d.open(tagSequence)
		d.raw(derOIDSubjectAltName)
		if subject == nil {
			d.raw(derTrue)
		}
		val := d.open(tagOctetString)
		names := d.open(tagSequence)
		for _, n := range opts.DNSNames {
			d.string(0x82, n) // [2] dNSName
		}
		for _, u := range opts.URIs {
			d.string(0x86, u.String()) // [6] uniformResourceIdentifier
		}
		for _, ip := range opts.IPAddresses {
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			d.bytes(0x87, ip) // [7] iPAddress
		}
		d.close(names)
		d.close(val)
		d.close(ext)
	}
	d.close(extList)
	d.close(exts)
	d.close(tbs)

	h := hash.New()
	h.Write(d.b[tbsStart:])
	sig, err := is.Key.Sign(rand.Reader, h.Sum(nil), hash)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	d.raw(sigAlg)
	d.header(tagBitString, len(sig)+1)
	d.b = append(d.b, 0) // no unused bits
	d.b = append(d.b, sig...)
	d.close(cert)
	return d.b, nil
}

// signatureAlgorithm picks the signature algorithm for an issuer key, as
// x509.CreateCertificate does by default, and returns its encoded
// AlgorithmIdentifier.
func signatureAlgorithm(pub crypto.PublicKey) ([]byte, crypto.Hash, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return derAlgECDSAWithSHA256, crypto.SHA256, nil
		case elliptic.P384():
			return derAlgECDSAWithSHA384, crypto.SHA384, nil
		}
	case *rsa.PublicKey:
		return derAlgSHA256WithRSA, crypto.SHA256, nil
	}
	return nil, 0, fmt.Errorf("%w: issuer key type %T is not supported", ErrInvalid, pub)
}
