package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
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

// IssueLeafDER signs a leaf (end-entity) certificate for pub and returns its
// DER. It is Issue's fast path for leaves: the TBSCertificate is encoded
// directly (no reflection) and signed once, without x509.CreateCertificate's
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
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: encode public key: %v", ErrInvalid, err)
	}
	sigAlg, hash, err := signatureAlgorithm(is.Key.Public())
	if err != nil {
		return nil, err
	}
	serial, err := NewSerial()
	if err != nil {
		return nil, err
	}
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
	if subject == nil && len(opts.URIs)+len(opts.DNSNames)+len(opts.IPAddresses) == 0 {
		return nil, fmt.Errorf("%w: a certificate needs a subject or a subject alternative name", ErrInvalid)
	}
	_, isRSA := pub.(*rsa.PublicKey)

	var tbs cryptobyte.Builder
	tbs.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1Int64(2) // v3
		})
		b.AddASN1BigInt(serial)
		addAlgorithm(b, sigAlg)
		b.AddBytes(is.Cert.RawSubject)
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			addTime(b, notBefore)
			addTime(b, notAfter)
		})
		if subject != nil {
			b.AddBytes(subject)
		} else {
			b.AddASN1(cbasn1.SEQUENCE, func(*cryptobyte.Builder) {})
		}
		b.AddBytes(spki)
		b.AddASN1(cbasn1.Tag(3).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				// keyUsage: digitalSignature (bit 0), keyEncipherment (bit 2) for RSA.
				// DER drops trailing zero bits of a named bit list: the
				// first octet counts the unused bits.
				addExtension(b, oidKeyUsage, true, func(b *cryptobyte.Builder) {
					b.AddASN1(cbasn1.BIT_STRING, func(b *cryptobyte.Builder) {
						if isRSA {
							b.AddBytes([]byte{5, 0xa0})
						} else {
							b.AddBytes([]byte{7, 0x80})
						}
					})
				})
				addExtension(b, oidExtKeyUsage, false, func(b *cryptobyte.Builder) {
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
						b.AddASN1ObjectIdentifier(oidServerAuth)
						b.AddASN1ObjectIdentifier(oidClientAuth)
					})
				})
				addExtension(b, oidBasicConstraints, true, func(b *cryptobyte.Builder) {
					b.AddASN1(cbasn1.SEQUENCE, func(*cryptobyte.Builder) {})
				})
				if len(is.Cert.SubjectKeyId) > 0 {
					addExtension(b, oidAuthorityKeyID, false, func(b *cryptobyte.Builder) {
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
							b.AddASN1(cbasn1.Tag(0).ContextSpecific(), func(b *cryptobyte.Builder) {
								b.AddBytes(is.Cert.SubjectKeyId)
							})
						})
					})
				}
				if len(opts.URIs)+len(opts.DNSNames)+len(opts.IPAddresses) > 0 {
					addExtension(b, oidSubjectAltName, subject == nil, func(b *cryptobyte.Builder) {
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
							for _, d := range opts.DNSNames {
								b.AddASN1(cbasn1.Tag(2).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes([]byte(d)) })
							}
							for _, u := range opts.URIs {
								b.AddASN1(cbasn1.Tag(6).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes([]byte(u.String())) })
							}
							for _, ip := range opts.IPAddresses {
								if v4 := ip.To4(); v4 != nil {
									ip = v4
								}
								b.AddASN1(cbasn1.Tag(7).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes(ip) })
							}
						})
					})
				}
			})
		})
	})
	tbsDER, err := tbs.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encode certificate: %w", err)
	}
	h := hash.New()
	h.Write(tbsDER)
	sig, err := is.Key.Sign(rand.Reader, h.Sum(nil), hash)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	var cert cryptobyte.Builder
	cert.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbsDER)
		addAlgorithm(b, sigAlg)
		b.AddASN1BitString(sig)
	})
	return cert.Bytes()
}

// signatureAlgorithm picks the signature algorithm for an issuer key, as
// x509.CreateCertificate does by default.
func signatureAlgorithm(pub crypto.PublicKey) (asn1.ObjectIdentifier, crypto.Hash, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return oidECDSAWithSHA256, crypto.SHA256, nil
		case elliptic.P384():
			return oidECDSAWithSHA384, crypto.SHA384, nil
		}
	case *rsa.PublicKey:
		return oidSHA256WithRSA, crypto.SHA256, nil
	}
	return nil, 0, fmt.Errorf("%w: issuer key type %T is not supported", ErrInvalid, pub)
}

// addAlgorithm adds an AlgorithmIdentifier: RSA algorithms carry NULL
// parameters, ECDSA ones none.
func addAlgorithm(b *cryptobyte.Builder, oid asn1.ObjectIdentifier) {
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(oid)
		if oid.Equal(oidSHA256WithRSA) {
			b.AddASN1NULL()
		}
	})
}

func addExtension(b *cryptobyte.Builder, oid asn1.ObjectIdentifier, critical bool, value func(*cryptobyte.Builder)) {
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(oid)
		if critical {
			b.AddASN1Boolean(true)
		}
		b.AddASN1(cbasn1.OCTET_STRING, value)
	})
}

// addTime adds UTCTime for 1950-2049 and GeneralizedTime otherwise (RFC 5280).
func addTime(b *cryptobyte.Builder, t time.Time) {
	t = t.UTC()
	if y := t.Year(); y >= 1950 && y < 2050 {
		b.AddASN1UTCTime(t)
	} else {
		b.AddASN1GeneralizedTime(t)
	}
}
